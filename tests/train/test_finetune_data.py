"""What the engine asks the task spec about the data: bad training files are refused before any
model is built, naming the file; the problem type comes from the data; the final scores come
from the Trainer's own evaluation."""

from __future__ import annotations

import json

import pytest
from launched import run_launched

from nlp._common import ConfigError
from nlp.recipes import recipe_path
from nlp.train.finetune import finetune, load_task_data
from nlp.train.recipe import load_recipe, recipe_from_dict

from train._recipe_fixtures import tiny_overrides


def _files_recipe(files: dict, **data):
    return recipe_from_dict({
        "task": {"name": "text-classification"},
        "model": {"preset": "ernie-3.0-tiny-pico-v2-zh", "init": "random"},
        "tokenizer": {"train": {"vocab_size": 12000}},
        "data": {"files": files, "dev_split": None, "test_split": None, **data},
        "train": {"eval": {"metric": "loss"}},
    })


def test_a_training_file_without_the_label_column_is_refused_before_training(tmp_path):
    train = tmp_path / "train.csv"
    train.write_text("text,sentiment\n很好,pos\n很差,neg\n", encoding="utf-8")
    with pytest.raises(ConfigError) as err:
        load_task_data(_files_recipe({"train": str(train)}))
    msg = str(err.value)
    assert str(train) in msg and "columns found: text, sentiment" in msg and "data.reader.label_column" in msg
    data = load_task_data(_files_recipe({"train": str(train)}, reader={"label_column": "sentiment"}))
    assert data.label_names == ["neg", "pos"]


def test_an_empty_training_file_is_named(tmp_path):
    train = tmp_path / "train.jsonl"
    train.write_text("\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=rf"the train split \('train'\) is empty: {train} holds no records"):
        load_task_data(_files_recipe({"train": str(train)}))


def test_a_gbk_training_file_reads_with_data_reader_encoding(tmp_path):
    train = tmp_path / "train.tsv"
    train.write_bytes("text\tlabel\n好吃\t好评\n难吃\t差评\n".encode("gbk"))
    with pytest.raises(ConfigError, match=rf"{train}:2: not utf-8 text .*data.reader.encoding: gbk"):
        load_task_data(_files_recipe({"train": str(train)}))
    data = load_task_data(_files_recipe({"train": str(train)}, reader={"encoding": "gbk"}))
    assert data.splits["train"]["text"] == ["好吃", "难吃"] and data.label_names == ["好评", "差评"]


class _LastEvaluation:
    """Records what the Trainer's on_train_end hook sees."""

    def __init__(self):
        self.calls = []

    def on_train_end(self, trainer, state):
        self.calls.append((state.step, trainer.evaluate()))


def test_final_scores_are_the_trainers_evaluation_of_the_exported_model(tmp_path):
    out = tmp_path / "run"
    recipe = load_recipe(recipe_path("sentiment-reviews"), tiny_overrides(out, steps=2))
    hook = _LastEvaluation()
    result = finetune(recipe, callbacks=[hook])
    assert len(hook.calls) == 1 and hook.calls[0][0] == 2
    assert hook.calls[0][1] == result.dev  # trainer.evaluate() on dev: the same loop, the same figures
    saved = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert saved["dev"] == result.dev and saved["test"] == result.test


def test_multi_label_data_sets_the_problem_type_and_is_scored(tmp_path):
    rows = [{"text": t, "label": labels} for t, labels in [
        ("价格便宜质量好", ["价格", "质量"]), ("物流很快", ["物流"]), ("质量一般", ["质量"]),
        ("价格贵物流慢", ["价格", "物流"]), ("东西不错", []), ("质量很好价格也好", ["质量", "价格"])] * 4]
    files = {}
    for split in ("train", "dev"):
        path = tmp_path / f"{split}.jsonl"
        path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n", encoding="utf-8")
        files[split] = str(path)
    out = tmp_path / "run"
    recipe = load_recipe(recipe_path("sentiment-reviews"), [
        *tiny_overrides(out, steps=2), "data.dataset=null", f"data.files.train={files['train']}",
        f"data.files.dev={files['dev']}", "data.test_split=null", "train.eval.metric=micro_f1",
        "data.reader.problem_type=multi_label_classification"])
    result = finetune(recipe)
    assert set(result.dev) == {"loss", "subset_accuracy", "micro_precision", "micro_recall", "micro_f1", "macro_f1"}
    config = json.loads((out / "model" / "config.json").read_text(encoding="utf-8"))
    assert config["problem_type"] == "multi_label_classification"
    assert [config["id2label"][str(i)] for i in range(3)] == ["价格", "物流", "质量"]


def test_final_scores_of_two_processes_match_one_process(tmp_path):
    """The final dev evaluation runs while the process group is up: each rank scores its share
    (QA: windows mapped back to questions after the gather), as during training."""
    import os
    import socket
    import sys
    from pathlib import Path

    from train._recipe_fixtures import cmrc_files

    files = cmrc_files(tmp_path)
    repo = Path(__file__).resolve().parents[2]

    def overrides(out):
        return [*tiny_overrides(out), "train.mixed_precision=no", f"data.files.train={files['train']}",
                f"data.files.dev={files['dev']}"]

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACCELERATE_")}
    env["PYTHONPATH"] = os.pathsep.join([str(repo), env.get("PYTHONPATH", "")])
    cmd = [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2",
           "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no",
           "--main_process_port", str(port), "-m", "nlp", "finetune", str(recipe_path("qa-cmrc2018")),
           *overrides(tmp_path / "two")]
    done = run_launched(cmd, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    two = json.loads((tmp_path / "two" / "results.json").read_text(encoding="utf-8"))
    assert two["summary"]["processes"] == 2
    one = finetune(load_recipe(recipe_path("qa-cmrc2018"), overrides(tmp_path / "one")))
    assert two["dev"] == pytest.approx(one.dev, rel=1e-5)


def test_an_empty_dev_file_is_refused_before_training(tmp_path):
    # it used to fail at the first evaluation, after training steps, with a numpy traceback
    train, dev = tmp_path / "train.jsonl", tmp_path / "dev.jsonl"
    train.write_text('{"text": "很好", "label": "pos"}\n{"text": "很差", "label": "neg"}\n', encoding="utf-8")
    dev.write_text("", encoding="utf-8")
    recipe = _files_recipe({"train": str(train), "dev": str(dev)}, dev_split="dev")
    with pytest.raises(ConfigError, match=rf"the dev split \('dev'\) is empty: {dev} holds no records; "
                                          r"or set data.dev_split: null"):
        load_task_data(recipe)


def test_extra_training_files_join_the_train_split_in_order(tmp_path):
    train, extra, extra2 = tmp_path / "train.csv", tmp_path / "extra.csv", tmp_path / "extra2.csv"
    train.write_text("text,label\n很好,pos\n很差,neg\n", encoding="utf-8")
    extra.write_text("text,label\n不错,pos\n太差了,neg\n", encoding="utf-8")
    extra2.write_text("text,label\n一般般,neg\n还行,pos\n", encoding="utf-8")
    data = load_task_data(_files_recipe({"train": str(train)}, extra_train=[str(extra), str(extra2)]))
    split = data.splits["train"]
    assert split["text"] == ["很好", "很差", "不错", "太差了", "一般般", "还行"]
    names = split.features["label"].names
    assert [names[i] for i in split["label"]] == ["pos", "neg", "pos", "neg", "neg", "pos"]
    assert data.sources["train"] == f"{train} + {extra} + {extra2}"
    assert data.extra_train_rows == 4 and data.own_train["text"] == ["很好", "很差"]
    # max_train_samples counts the joined split
    assert len(load_task_data(_files_recipe({"train": str(train)}, extra_train=[str(extra)],
                                            max_train_samples=3)).splits["train"]) == 3


def test_an_extra_training_file_is_checked_and_named(tmp_path):
    train = tmp_path / "train.csv"
    train.write_text("text,label\n很好,pos\n很差,neg\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"data.extra_train\[0\]: file '.*missing.csv' does not exist"):
        _files_recipe({"train": str(train)}, extra_train=[str(tmp_path / "missing.csv")])
    other = tmp_path / "other.csv"
    other.write_text("text,label\n好评如潮,good\n", encoding="utf-8")
    # read with the train split's labels: the unknown one is named with its line
    with pytest.raises(ConfigError, match=rf"data.extra_train\[0\] \({other}\): {other}:2: label 'good' is not in "
                                          r"the label set \(neg, pos\)"):
        load_task_data(_files_recipe({"train": str(train)}, extra_train=[str(other)]))
    unlabelled = tmp_path / "unlabelled.csv"
    unlabelled.write_text("text\n不错\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=rf"data.extra_train\[0\] \({unlabelled}\): .*no 'label' label.*columns found: text"):
        load_task_data(_files_recipe({"train": str(train)}, extra_train=[str(unlabelled)]))
    bad = tmp_path / "bad.csv"
    bad.write_text("text,label\n\"unclosed,pos\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=rf"data.extra_train\[0\] \({bad}\): "):
        load_task_data(_files_recipe({"train": str(train)}, extra_train=[str(bad)]))


def test_an_extra_training_file_joins_a_split_whose_records_have_ids(tmp_path):
    # a built-in NER dataset's records carry an `id` that a teacher's CoNLL lines do not: the extra
    # records get ids of their own ("data.extra_train[0] (FILE):ROW") instead of a refusal; and a
    # teacher's file that uses some of the tags only reads them by name with the split's ids
    import datasets

    from nlp.tasks.registry import get_task
    from nlp.train.finetune import _with_extra_train

    tags = datasets.ClassLabel(names=["O", "B-LOC", "I-LOC", "B-PER", "I-PER"])
    features = datasets.Features({"id": datasets.Value("string"), "tokens": datasets.Sequence(datasets.Value("string")),
                                  "ner_tags": datasets.Sequence(tags)})
    train = datasets.Dataset.from_dict({"id": ["pd-1"], "tokens": [list("去北京")], "ner_tags": [[0, 1, 2]]},
                                       features=features)
    extra = tmp_path / "teacher.conll"
    extra.write_text("见 O\n李 B-PER\n鹏 I-PER\n\n", encoding="utf-8")
    recipe = recipe_from_dict({"task": {"name": "token-classification"}, "model": {"name": "x"},
                               "data": {"dataset": "zh-ner", "extra_train": [str(extra)]}})
    joined, source = _with_extra_train(get_task("token-classification"), recipe.data, train, "zh-ner")
    assert joined.column_names == ["id", "tokens", "ner_tags"]
    assert joined["id"] == ["pd-1", f"data.extra_train[0] ({extra}):0"]
    assert joined["tokens"][1] == list("见李鹏") and joined["ner_tags"][1] == [0, 3, 4]
    assert source == f"zh-ner + {extra}"
