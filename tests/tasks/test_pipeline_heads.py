"""A pipeline runs only a head that was trained: another task's model, or a pretrained base model
under a task head, would answer at random (a sentiment pipeline on the NER model used to answer
"B-LOC", a different label each run), so both are refused in one line; the tasks that share a
trained head (zero-shot and similarity on the embedding model, the lexical tasks on the lexical
model) and feature extraction from a base model still run."""

from __future__ import annotations

import pytest

import nlp
from nlp._common import ConfigError
from nlp.cli import main


@pytest.mark.parametrize("task, model, trained", [
    ("sentiment-analysis", "ernie-tiny-zh-ner", "token-classification"),
    ("ner", "e5-small-zh-sentiment", "text-classification"),
    ("lexical-analysis", "ernie-tiny-zh-ner", "token-classification"),
])
def test_another_task_s_model_is_refused(task, model, trained):
    with pytest.raises(ConfigError, match=rf"holds a {trained} model .*head was never trained, so it would "
                                          rf"answer at random\. Use a .* model, or run this one as {trained}"):
        nlp.pipeline(task, model=model)


def test_a_base_model_under_a_task_head_is_refused():
    with pytest.raises(ConfigError, match=r"has no text-classification head: its weights \(classifier.bias, "
                                          r"classifier.weight\) are not in the checkpoint.*Fine-tune it first"):
        nlp.pipeline("text-classification", model="ernie-tiny-zh")


@pytest.mark.parametrize("task, model, text", [
    ("zero-shot-classification", "e5-small-zh-embedding", None),
    ("sentence-similarity", "e5-small-zh-embedding", None),
    ("pos-tagging", "ernie-tiny-zh-lexical", "我爱北京"),
    ("word-segmentation", "ernie-tiny-zh-lexical", "我爱北京"),
    ("feature-extraction", "ernie-tiny-zh", "我爱北京"),  # a base model's vectors: no head to train
    ("feature-extraction", "e5-small-zh-sentiment", "我爱北京"),  # a classifier's encoder: pooled, no weights
])
def test_a_head_the_model_has_runs(task, model, text):
    pipe = nlp.pipeline(task, model=model)
    if text is not None:
        assert len(pipe(text)) > 0


def test_the_cli_refuses_in_one_line(tmp_path, capsys):
    texts = tmp_path / "a.txt"
    texts.write_text("张三在北京工作\n", encoding="utf-8")
    out = tmp_path / "out.jsonl"
    assert main(["predict", "ernie-tiny-zh-ner", "--task", "sentiment-analysis", "--input", str(texts),
                 "--output", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "holds a token-classification model" in err and "Traceback" not in err
    assert not out.exists()


def _ner_file(tmp_path):
    data = tmp_path / "ner.conll"
    data.write_text("张\tB-PER\n三\tI-PER\n在\tO\n北\tB-LOC\n京\tI-LOC\n\n", encoding="utf-8")
    return data


def test_nlp_evaluate_refuses_another_task_s_head(tmp_path, capsys):
    reviews = tmp_path / "reviews.jsonl"
    reviews.write_text('{"text": "很好", "label": "positive"}\n', encoding="utf-8")
    assert main(["evaluate", "ernie-tiny-zh-ner", "--task", "sentiment-analysis", "--data", str(reviews)]) == 2
    err = capsys.readouterr().err
    assert "holds a token-classification model" in err and "Traceback" not in err


@pytest.mark.parametrize("flag, value", [("--batch-size", "-1"), ("--batch-size", "0"), ("--max-length", "0"),
                                         ("--max-samples", "0")])
def test_nlp_evaluate_refuses_a_size_below_one_naming_the_flag(tmp_path, capsys, flag, value):
    # -1 used to end in a TypeError deep in scoring; 0 silently ran with the default
    assert main(["evaluate", "ernie-tiny-zh-ner", "--data", str(_ner_file(tmp_path)), flag, value]) == 2
    err = capsys.readouterr().err
    assert f"({flag}) must be a whole number >= 1, got {value}" in err and "Traceback" not in err


def test_nlp_evaluate_s_data_errors_name_the_flags_given(tmp_path, capsys):
    # the split is scored as a recipe's train split: its errors used to say data.train_split and
    # "the train split", which the user never named
    assert main(["evaluate", "ernie-tiny-zh-ner", "--data", "msra-ner", "--split", "nope"]) == 2
    assert "error: --split: 'msra-ner' has no split 'nope'; valid: train, dev, test" in capsys.readouterr().err
    empty = tmp_path / "empty.conll"
    empty.write_text("", encoding="utf-8")
    assert main(["evaluate", "ernie-tiny-zh-ner", "--data", str(empty)]) == 2
    err = capsys.readouterr().err
    assert "the test split" in err and "train split" not in err and "data.train_split" not in err


def test_nlp_evaluate_says_when_the_dataset_is_another_task_s(capsys):
    assert main(["evaluate", "ernie-tiny-zh-ner", "--data", "reviews-zh", "--max-samples", "5"]) == 2
    err = capsys.readouterr().err
    assert "the test split (dataset 'reviews-zh') has no labels" in err
    assert "'reviews-zh' is a text-classification dataset and the model is token-classification" in err
