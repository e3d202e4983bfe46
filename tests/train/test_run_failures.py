"""Runs that break (issue 15, section 3): a run that died before its first checkpoint is started
again by the same command; an output_dir that cannot be written, or a full disk, is one line
naming the path and the cause; the first log record after a resume equals the unbroken run's;
a run whose model diverged to NaN is not reported "finished"."""

from __future__ import annotations

import errno
import json
import logging
import os
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))
import _toy  # noqa: E402

from nlp._common import ConfigError, DataError  # noqa: E402
from nlp.train import Trainer, TrainingError, TrainingInterrupted  # noqa: E402
from nlp.train import checkpoint as ckpt_mod  # noqa: E402
from nlp.train import run_dir as run_dir_mod  # noqa: E402
from nlp.train.errors import CheckpointWriteError  # noqa: E402

RUN_FILES = ("recipe.yaml", "tokenizer")


def toy_trainer(out, *, collate=_toy.collate, callbacks=(), eval_dataset=True, **overrides):
    torch.manual_seed(0)
    return Trainer(_toy.ToyClassifier(), _toy.settings(out, **overrides), train_dataset=_toy.make_dataset(48),
                   collate_fn=collate, eval_dataset=_toy.make_dataset(16, seed=1) if eval_dataset else None,
                   compute_metrics=_toy.accuracy, run_files=RUN_FILES, callbacks=callbacks)


# ------------------------------------------------------------------ died before a checkpoint


def test_a_data_error_at_step_1_leaves_a_directory_the_same_command_restarts(tmp_path, caplog):
    out = tmp_path / "run"

    def broken(features):
        raise DataError("record 3: bad label")

    with pytest.raises(DataError, match="bad label"):
        toy_trainer(out, collate=broken).train()
    assert (out / "settings.json").is_file() and not (out / "checkpoints").exists()
    with caplog.at_level(logging.WARNING, logger="nlp.train.trainer"):
        result = toy_trainer(out).train()
    assert result.status == "finished" and result.step == 12
    assert "before its first checkpoint" in caplog.text and "settings.json" in caplog.text
    assert _toy.losses(out) == _toy.losses(_make_reference(tmp_path))


def _make_reference(tmp_path):
    ref = tmp_path / "reference"
    if not ref.exists():
        toy_trainer(ref).train()
    return ref


def _leave_a_killed_first_save(out: Path) -> None:
    """What kill -9 during the first checkpoint leaves: the run's files and a temp checkpoint."""
    out.mkdir(parents=True)
    (out / "settings.json").write_text(json.dumps({"seed": 42}))
    (out / "metrics.jsonl").write_text('{"type": "train", "step": 1, "loss": 9.0}\n')
    (out / "recipe.yaml").write_text("task: {name: text-classification}\n")
    (out / "tokenizer").mkdir()
    (out / "tokenizer" / "vocab.txt").write_text("[PAD]\n")
    (out / ".summary.json.ab12cd34.tmp").write_text("{")  # an atomic_write cut short
    tmp = out / "checkpoints" / ".tmp-step-00000004"
    tmp.mkdir(parents=True)
    (tmp / "model.safetensors").write_bytes(b"half")


def test_kill_9_during_the_first_save_is_restarted_with_a_warning(tmp_path, caplog):
    out = tmp_path / "run"
    _leave_a_killed_first_save(out)
    with caplog.at_level(logging.WARNING, logger="nlp.train.trainer"):
        result = toy_trainer(out).train()
    assert result.step == 12 and "starting that run again" in caplog.text
    assert _toy.losses(out) == _toy.losses(_make_reference(tmp_path))  # the stale record is gone
    assert not (out / "checkpoints" / ".tmp-step-00000004").exists()
    assert (out / "recipe.yaml").is_file()  # the caller's files are the caller's to rewrite


@pytest.mark.parametrize("extra", ["notes.txt", "model", "checkpoints/mine.bin"])
def test_anything_else_is_still_refused(tmp_path, extra):
    out = tmp_path / "run"
    _leave_a_killed_first_save(out)
    path = out / extra
    path.write_text("mine") if "." in extra else path.mkdir()
    with pytest.raises(ConfigError, match=f"not empty and holds no checkpoint to resume .*{extra}"):
        toy_trainer(out).train()
    assert (out / extra).exists()


def test_without_settings_json_no_run_took_the_directory(tmp_path):
    out = tmp_path / "run"
    (out / "tokenizer").mkdir(parents=True)  # a user's tokenizer, not a dead run's
    with pytest.raises(ConfigError, match="holds no checkpoint to resume .*tokenizer"):
        toy_trainer(out).train()


# ------------------------------------------------------------------ unwritable output_dir


def test_output_dir_that_is_a_file_or_under_a_file(tmp_path):
    (tmp_path / "f").write_text("x")
    with pytest.raises(ConfigError, match=r"output_dir .*f is a file, not a directory"):
        toy_trainer(tmp_path / "f")
    with pytest.raises(ConfigError, match=r"output_dir .*f/run lies under .*f, which is a file"):
        toy_trainer(tmp_path / "f" / "run")
    assert (tmp_path / "f").read_text() == "x"


def test_read_only_output_dir(tmp_path, monkeypatch):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        if os.access(ro, os.W_OK):  # root ignores permissions: make os.access tell the truth for ro
            real = os.access
            monkeypatch.setattr(run_dir_mod.os, "access", lambda p, mode: False if Path(p) == ro else real(p, mode))
        with pytest.raises(ConfigError, match=r"output_dir .*ro/run: .*ro is read-only"):
            toy_trainer(ro / "run")
    finally:
        ro.chmod(0o755)


def test_a_failed_first_write_names_the_directory_and_the_cause(tmp_path, monkeypatch):
    """What os.access cannot see (a read-only file system, ACLs) fails at the first write."""
    trainer = toy_trainer(tmp_path / "run")

    def refuse(path, *a, **k):
        raise PermissionError(errno.EROFS, "Read-only file system", str(path))

    monkeypatch.setattr(run_dir_mod, "atomic_write", refuse)
    with pytest.raises(ConfigError, match=r"cannot write train.output_dir .*run: Read-only file system"):
        trainer.train()


def test_disk_full_while_saving_names_the_checkpoint_and_keeps_the_previous(tmp_path, monkeypatch):
    real = ckpt_mod.safetensors.torch.save_model
    calls = 0

    def fill_up(*a, **k):
        nonlocal calls
        calls += 1
        if calls == 2:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(*a, **k)

    monkeypatch.setattr(ckpt_mod.safetensors.torch, "save_model", fill_up)
    trainer = toy_trainer(tmp_path / "a", eval__every_steps=None, checkpoint__every_steps=2)
    with pytest.raises(CheckpointWriteError) as e:
        trainer.train()
    message = str(e.value)
    assert "step-00000004: No space left on device" in message and "\n" not in message
    assert "previous checkpoint" in message and "step-00000002 is intact" in message
    root = tmp_path / "a" / "checkpoints"
    assert sorted(p.name for p in root.iterdir()) == ["step-00000002"]


def test_torch_save_failing_is_a_checkpoint_write_error_too(tmp_path, monkeypatch):
    def fail(*a, **k):
        raise RuntimeError("[enforce fail at inline_container.cc:664] . unexpected pos 64 vs 0\nmore")

    monkeypatch.setattr(ckpt_mod.torch, "save", fail)
    with pytest.raises(CheckpointWriteError, match=r"step-00000002: \[enforce fail .* vs 0\. .*no earlier checkpoint"):
        toy_trainer(tmp_path / "a", eval__every_steps=None, checkpoint__every_steps=2).train()
    assert not list((tmp_path / "a" / "checkpoints").iterdir())


def test_cli_prints_one_line_without_a_traceback(tmp_path, monkeypatch, capsys):
    from nlp.cli import main

    model = Path(__import__("nlp").__file__).parent / "assets" / "ernie-tiny-zh"
    common = ["model.name=null", "model.preset=ernie-3.0-tiny-pico-v2-zh", "model.init=random",
              "model.config.num_hidden_layers=1", "model.config.hidden_size=32",
              "model.config.num_attention_heads=2", "model.config.intermediate_size=64",
              f"tokenizer.name={model}", "data.max_length=64", "data.max_train_samples=16",
              "data.max_eval_samples=8", "train.data.batch_size=8", "train.max_steps=4",
              "train.eval.every_steps=null", "train.checkpoint.every_steps=2", "train.log.progress_bar=false",
              "train.log.tensorboard=false", "train.log.plots=false", "train.mixed_precision=no"]
    (tmp_path / "file").write_text("x")
    assert main(["finetune", "recipes/sentiment-reviews.yaml", *common,
                 f"train.output_dir={tmp_path / 'file'}"]) == 2
    err = capsys.readouterr().err
    assert f"error: train.output_dir {tmp_path / 'file'} is a file" in err and "Traceback" not in err

    real, calls = ckpt_mod.safetensors.torch.save_model, []

    def fill_up(*a, **k):
        calls.append(1)
        if len(calls) == 2:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(*a, **k)

    monkeypatch.setattr(ckpt_mod.safetensors.torch, "save_model", fill_up)
    assert main(["finetune", "recipes/sentiment-reviews.yaml", *common, f"train.output_dir={tmp_path / 'run'}"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith(f"error: could not write checkpoint {tmp_path / 'run' / 'checkpoints'}")
    assert "No space left on device" in err[-1] and not any("Traceback" in line for line in err)


# ------------------------------------------------------------------ the log after a resume


def test_the_first_log_record_after_a_resume_averages_the_same_steps(tmp_path):
    """log every 4 steps, stopped at step 6: the record of step 8 averages steps 5-8 in both."""
    kw = dict(epochs=3, log__every_steps=4, eval__every_steps=None)
    toy_trainer(tmp_path / "full", **kw).train()
    with pytest.raises(TrainingInterrupted):
        toy_trainer(tmp_path / "run", callbacks=[_toy.StopAt(6)], **kw).train()
    state = json.loads((tmp_path / "run" / "checkpoints" / "step-00000006" / "trainer_state.json").read_text())
    assert state["log_window"]["loss_steps"] == 2
    toy_trainer(tmp_path / "run", **kw).train()
    full, run = _toy.losses(tmp_path / "full"), _toy.losses(tmp_path / "run")
    assert sorted(run) == [4, 8, 12, 16, 18] == sorted(full)
    assert run == full  # exactly: the same sums in the same order
    summary = lambda p: json.loads((p / "summary.json").read_text())  # noqa: E731
    assert summary(tmp_path / "run")["steps"] == summary(tmp_path / "full")["steps"] == 18


# ------------------------------------------------------------------ diverged runs


class BreakTheModel:
    """Puts NaN into the model's head after `step` (what lr=inf does to it)."""

    def __init__(self, step):
        self.step = step

    def on_step_end(self, trainer, state):
        if state.step == self.step:
            with torch.no_grad():
                trainer.model.head.weight.fill_(float("nan"))


def test_a_nan_evaluation_metric_fails_the_run(tmp_path):
    out = tmp_path / "a"
    with pytest.raises(TrainingError, match=r"evaluation at step 4 gave loss=nan"):
        toy_trainer(out, eval__metric="loss", callbacks=[BreakTheModel(2)]).train()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "failed"
    assert not (out / "model").exists()


def test_a_model_with_nan_parameters_is_not_finished(tmp_path):
    out = tmp_path / "a"
    with pytest.raises(TrainingError, match=r"parameters hold NaN/inf \(head.weight\)"):
        toy_trainer(out, eval_dataset=False, eval__metric="loss", callbacks=[BreakTheModel(10)]).train()
    assert json.loads((out / "summary.json").read_text())["status"] == "failed"
    assert not (out / "model").exists()
