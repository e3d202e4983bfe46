"""One writer of a run's own files (fine-tuning's and pretraining's recipe.yaml and tokenizer/),
and one home for what a run, model or export directory holds (nlp/tasks/model_dirs.py)."""

from __future__ import annotations

import json

import pytest

from nlp._common import ConfigError
from nlp.train.run_dir import leftovers_of_a_dead_run, write_run_files


class _Saves:
    def __init__(self, fail: bool = False) -> None:
        self.fail, self.calls = fail, 0

    def save_pretrained(self, path):
        self.calls += 1
        path.mkdir(parents=True, exist_ok=True)
        (path / "tokenizer_config.json").write_text("{}", encoding="utf-8")
        if self.fail:
            raise OSError("disk full")


def test_run_files_are_written_atomically_and_a_resumed_run_keeps_its_tokenizer(tmp_path):
    write_run_files(tmp_path, {"recipe.yaml": "task: {name: qa}\n", "tokenizer": _Saves()})
    assert (tmp_path / "recipe.yaml").read_text(encoding="utf-8") == "task: {name: qa}\n"
    assert (tmp_path / "tokenizer" / "tokenizer_config.json").is_file()
    again = _Saves()
    write_run_files(tmp_path, {"tokenizer": again})
    assert again.calls == 0  # kept: token ids never change under a resumed model
    (tmp_path / "other").mkdir()
    with pytest.raises(OSError, match="disk full"):
        write_run_files(tmp_path / "other", {"tokenizer": _Saves(fail=True)})
    assert not (tmp_path / "other" / "tokenizer").exists()  # no half-written tokenizer/ in place
    leftovers, foreign = leftovers_of_a_dead_run(tmp_path / "other", ("tokenizer",))
    assert foreign == []  # what a failed write leaves is recognised as a temporary


def test_pretraining_writes_its_run_files_through_the_same_writer(tmp_path):
    from types import SimpleNamespace

    from nlp.train.pretrain import _WriteRunFiles

    trainer = SimpleNamespace(accelerator=SimpleNamespace(is_main_process=True), output_dir=tmp_path)
    with pytest.raises(OSError, match="disk full"):
        _WriteRunFiles({"recipe.yaml": "model: {}\n", "tokenizer": _Saves(fail=True)}).on_train_start(trainer, None)
    assert (tmp_path / "recipe.yaml").is_file() and not (tmp_path / "tokenizer").exists()  # atomic: nothing half-written
    _WriteRunFiles({"tokenizer": _Saves()}).on_train_start(trainer, None)
    assert (tmp_path / "tokenizer" / "tokenizer_config.json").is_file()


def test_one_home_says_which_model_task_and_recipe_a_directory_holds(tmp_path):
    from nlp.tasks.model_dirs import locate_model
    from nlp.tasks.ner.heads import ErnieForTokenClassification

    from tasks._task_fixtures import tiny_config

    run = tmp_path / "run"
    ErnieForTokenClassification(tiny_config(50, num_labels=3)).save_pretrained(run / "model")
    (run / "recipe.yaml").write_text("task: {name: ner}\ndata: {max_length: 64}\n", encoding="utf-8")
    where = locate_model(run)
    assert (where.model_dir, where.kind, where.spec.name) == (run / "model", "run", "token-classification")
    assert where.recipe["data"]["max_length"] == 64
    model = locate_model(run / "model")
    assert model.kind == "model" and model.recipe == where.recipe  # RUN/recipe.yaml beside RUN/model
    assert locate_model(run, "qa").spec.name == "question-answering"  # --task wins
    export = tmp_path / "export"
    export.mkdir()
    (export / "config.json").write_text((run / "model" / "config.json").read_text(encoding="utf-8"), encoding="utf-8")
    (export / "manifest.json").write_text(json.dumps({"task": "question-answering"}), encoding="utf-8")
    assert locate_model(export).kind == "export" and locate_model(export).spec.name == "question-answering"
    cfg = json.loads((run / "model" / "config.json").read_text(encoding="utf-8"))
    (run / "model" / "config.json").write_text(json.dumps({**cfg, "architectures": ["ErnieForMaskedLM"]}))
    assert locate_model(run).spec.name == "token-classification"  # the run recipe's task.name
    (run / "recipe.yaml").unlink()
    with pytest.raises(ConfigError, match="name no task head .* pass --task"):
        locate_model(run)
    with pytest.raises(ConfigError, match="holds no model: neither a run directory"):
        locate_model(tmp_path)
    with pytest.raises(ConfigError, match="does not exist"):
        locate_model(tmp_path / "nope")
