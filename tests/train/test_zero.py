"""`train.distributed.strategy=deepspeed` (issue 26): DeepSpeed ZeRO-2 and ZeRO-3 (nlp.train.zero).

`nlp finetune` under torchrun on 2 gloo CPU processes against one plain process over the same
global batches (the tiny model and runs of tests/train/_sharded_launch.py), plus the toy engine
of tests/train/_toy.py in this process for what needs no second process: per-step losses and
final parameters equal one process's (relative <= 1e-6, fp32); under ZeRO-3 every parameter is
a partition, half on each process, during training; the checkpoints are DeepSpeed's, written in
the trainer's atomic scheme, and resume exactly after SIGTERM and after kill -9 in the middle of a
save; a resume on another number of processes and a checkpoint of another strategy are refused;
the model gathered on rank 0 loads in transformers. Every launch must exit as expected, and never
with gloo's abort at exit.
"""

from __future__ import annotations

import functools
import json
import logging
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from nlp._common import ConfigError
from nlp.train import TrainingError, TrainingInterrupted
from nlp.train import zero

pytest.importorskip("deepspeed", reason="strategy=deepspeed needs DeepSpeed (in the dev extra)")

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import _toy  # noqa: E402
from _sharded_launch import (  # noqa: E402
    REPO,
    TIMEOUT,
    assert_same_weights,
    command,
    env,
    grad_norms,
    kill_during_save,
    losses,
    overrides,
    reference_run,
    stop_after,
    run,
    weights,
)


def test_settings_refuse_what_cannot_work(monkeypatch):
    with pytest.raises(ConfigError, match=r"zero_stage=3 applies to strategy=deepspeed only \(strategy is 'fsdp'\)"):
        _toy.settings("x", distributed__strategy="fsdp", distributed__zero_stage=3)
    with pytest.raises(ConfigError, match="zero_stage must be 2 or 3, got 1"):
        _toy.settings("x", distributed__strategy="deepspeed", distributed__zero_stage=1)
    with pytest.raises(ConfigError, match="Did you mean 'deepspeed'"):
        _toy.settings("x", distributed__strategy="deepspeeed")
    # a command-line override arrives as a string; no stage means 2
    assert _toy.settings("x", distributed__strategy="deepspeed", distributed__zero_stage="3").distributed.stage == 3
    assert _toy.settings("x", distributed__strategy="deepspeed").distributed.stage == 2
    with pytest.raises(ConfigError, match="strategy=deepspeed with mixed_precision=fp16"):
        zero.check_zero(precision="fp16")
    monkeypatch.setitem(sys.modules, "deepspeed", None)  # as if it were not installed
    with pytest.raises(ImportError, match=r"strategy=deepspeed \(strategy=fsdp needs no extra\).*nlp-zh\[distributed\]"):
        zero.check_zero(precision="no")


@pytest.mark.parametrize("stage", [2, 3])
def test_one_process_resumes_exactly_and_refuses_other_formats(tmp_path, stage):
    """One process still runs the engine (over a one-process group), so checkpoints have one
    format; stopped at step 5 and resumed, the run ends with an unbroken ddp run's losses and its
    best model (step 8, loaded from a DeepSpeed checkpoint at the end)."""
    ds = {"distributed__strategy": "deepspeed", "distributed__zero_stage": stage}
    with pytest.raises(TrainingInterrupted, match="at step 5/12"):
        _toy.make_trainer(tmp_path / "run", callbacks=[_toy.StopAt(5)], **ds).train()
    ckpt = tmp_path / "run" / "checkpoints" / "step-00000005"
    assert (ckpt / "deepspeed").is_dir() and not (ckpt / "model.safetensors").exists()
    resumed = _toy.make_trainer(tmp_path / "run", **ds).train()
    unbroken = _toy.make_trainer(tmp_path / "ref").train()
    assert resumed.best_step == unbroken.best_step != 12
    assert _toy.losses(tmp_path / "run") == pytest.approx(_toy.losses(tmp_path / "ref"), rel=1e-6, abs=0)
    got, want = (load_file(str(r.model_dir / "model.safetensors")) for r in (resumed, unbroken))
    assert_same_weights(got, want, rel=1e-6)
    # the one-process group is gone with the run, and so is the LOCAL_RANK DeepSpeed needed (left
    # behind, it would make the processes this one starts take themselves for launched ones)
    assert not torch.distributed.is_initialized() and "LOCAL_RANK" not in os.environ
    with pytest.raises(ConfigError, match="written by train.distributed.strategy=ddp .* strategy=deepspeed"):
        _toy.make_trainer(tmp_path / "ref", max_steps=20, **ds).train()
    with pytest.raises(ConfigError, match="written by train.distributed.strategy=deepspeed .* strategy=fsdp"):
        _toy.make_trainer(tmp_path / "run", max_steps=20, distributed__strategy="fsdp").train()


def test_nonfinite_loss_skips_the_step_like_ddp_then_stops(tmp_path, caplog):
    """A NaN loss: DeepSpeed's step finds the non-finite gradient norm and drops the update and the
    schedule's step, so the run goes on exactly as ddp's, which skips the step itself. Without
    clipping (max_grad_norm null) too: the norm is computed with an infinite threshold."""
    runs = {}
    for strategy in ("deepspeed", "ddp"):
        trainer = _toy.make_trainer(tmp_path / strategy, distributed__strategy=strategy, optim__max_grad_norm=None)
        trainer.model.nan_steps = {2}
        with caplog.at_level(logging.WARNING):
            trainer.train()
        runs[strategy] = _toy.losses(tmp_path / strategy)
    assert runs["deepspeed"] == pytest.approx(runs["ddp"], rel=1e-6, abs=0, nan_ok=True)
    assert math.isnan(runs["deepspeed"][2]) and not math.isnan(runs["deepspeed"][3])
    assert "DeepSpeed applied a step" not in caplog.text

    trainer = _toy.make_trainer(tmp_path / "stops", distributed__strategy="deepspeed", distributed__zero_stage=3,
                                max_nonfinite_steps=3)
    trainer.model.nan_steps = {3, 4, 5}
    with pytest.raises(TrainingError, match="NaN/inf for 3 steps in a row"):
        trainer.train()
    assert not torch.distributed.is_initialized() and "LOCAL_RANK" not in os.environ  # ended on the error


def test_bf16_follows_fp32_and_exports_fp32(tmp_path):
    """DeepSpeed's bf16: the model computes in bf16, the master weights (fp32) are what the
    optimizer updates and what the exported model holds."""
    bf16 = _toy.make_trainer(tmp_path / "bf16", mixed_precision="bf16", distributed__strategy="deepspeed").train()
    _toy.make_trainer(tmp_path / "fp32", distributed__strategy="deepspeed").train()
    got, want = _toy.losses(tmp_path / "bf16"), _toy.losses(tmp_path / "fp32")
    assert got == pytest.approx(want, rel=1e-2, abs=0)  # 0.4% seen: the whole forward runs in bf16
    assert got != pytest.approx(want, rel=1e-6, abs=0)  # it did run in bf16
    assert all(v.dtype == torch.float32 for v in load_file(str(bf16.model_dir / "model.safetensors")).values())


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """One plain process's run per batching and settings (_sharded_launch.reference_run: run once
    per session, shared with the other sharded strategy's tests)."""
    return functools.partial(reference_run, tmp_path_factory)


@pytest.mark.parametrize("stage, batching, same, extra", [
    # an evaluation (and a checkpoint, rotated) after every step, between training steps
    (2, "dynamic", (), ("train.eval.every_steps=1", "train.checkpoint.load_best_at_end=false")),
    # accumulation over 2 micro-batches; clipped at 0.05 by the global norm (2 of the 4 steps)
    (3, "packed", ("train.grad_accum_steps=2", "train.optim.max_grad_norm=0.05"), ()),
])
def test_zero_on_two_processes_trains_like_one(tmp_path, reference, stage, batching, same, extra):
    out = tmp_path / "zero"
    run(tmp_path / "probes", 2, overrides(out, batching, *same, "train.distributed.strategy=deepspeed",
                                          f"train.distributed.zero_stage={stage}", *extra))
    one = reference(batching, *same)
    want, got = losses(one), losses(out)
    assert sorted(got) == [1, 2, 3, 4] and len(set(want.values())) > 1  # the model did train
    assert got == pytest.approx(want, rel=1e-6, abs=0)
    assert grad_norms(out) == pytest.approx(grad_norms(one), rel=1e-5, abs=0)
    assert_same_weights(weights(out), weights(one), rel=1e-6)

    for rank in (0, 1):
        probe = json.loads((tmp_path / "probes" / f"rank{rank}.json").read_text())
        assert probe["processes"] == 2
        params = probe["params"]
        assert {n.split(".layers.")[1].split(".")[0] for n in params if ".layers." in n} == {"0", "1"}
        if stage == 3:  # every parameter a partition, half of it (rounded up) on each process,
            # and not gathered between steps
            whole = [n for n, p in params.items()
                     if not p["partitioned"] or p["local"] != -(-p["global"] // 2) or p["gathered"]]
            assert not whole, f"left whole on rank {rank}: {whole}"
        else:  # ZeRO-2 keeps the parameters whole (gradients and AdamW state are split)
            assert not any(p["partitioned"] for p in params.values())
    summary = json.loads((out / "summary.json").read_text())
    assert summary["processes"] == 2 and summary["status"] == "finished"
    results, want_results = (json.loads((d / "results.json").read_text()) for d in (out, one))
    for role in ("dev", "test"):  # scored through the engine (dev: uneven shares)
        assert results[role] == pytest.approx(want_results[role], rel=1e-5)
    transformers = pytest.importorskip("transformers")
    hf = transformers.AutoModelForSequenceClassification.from_pretrained(out / "model")  # gathered on rank 0
    torch.testing.assert_close(hf.classifier.weight.detach(), weights(one)["classifier.weight"], rtol=1e-4, atol=1e-5)
    final = out / "checkpoints" / "step-00000004"
    assert len(list((final / "deepspeed").glob("*optim_states.pt"))) == 2  # one per process
    assert not (final / "model.safetensors").exists()


def test_zero3_resumes_exactly_after_sigterm_and_kill_9_mid_save(tmp_path, reference):
    out, probes = tmp_path / "run", tmp_path / "probes"
    ds = ["train.distributed.strategy=deepspeed", "train.distributed.zero_stage=3"]
    overrides_ = overrides(out, "dynamic", *ds, "train.checkpoint.every_steps=2")

    # 1. SIGTERM to both processes after step 1: each finishes the step, a checkpoint, stops.
    _, err = stop_after(probes, overrides_, 1, 2)
    assert "stopped by signal 15 at step 1/4" in err, err[-4000:]
    assert [p.name for p in sorted((out / "checkpoints").glob("step-*"))] == ["step-00000001"]
    on_one = tmp_path / "on-one"
    shutil.copytree(out, on_one)

    # 2. Resumed on 2 processes; killed (-9) while writing the checkpoint of step 2.
    kill_during_save(probes, overrides_, 2)
    assert (out / "checkpoints" / ".tmp-step-00000002" / "deepspeed").is_dir()  # half-written
    assert [p.name for p in sorted((out / "checkpoints").glob("step-*"))] == ["step-00000001"]

    # 3. The same command again: resumes step 1's checkpoint and finishes like an unbroken run.
    run(probes, 2, overrides_)
    assert losses(out) == pytest.approx(losses(reference("dynamic")), rel=1e-6, abs=0)
    assert_same_weights(weights(out), weights(reference("dynamic")), rel=1e-6)

    # 4. The 2-process checkpoint on one process: refused, naming both numbers.
    one = subprocess.run(command(probes / "one", 1, overrides(on_one, "dynamic", *ds)), cwd=REPO, env=env(),
                         capture_output=True, text=True, timeout=TIMEOUT)
    assert one.returncode != 0
    assert "written by 2 DeepSpeed processes; this run has 1" in one.stderr, one.stderr[-4000:]
    assert "terminate called" not in one.stderr, one.stderr[-4000:]
