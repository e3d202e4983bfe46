"""Launching `nlp finetune` on 1 or N gloo CPU processes (torchrun) for the sharded-training tests
(tests/train/test_sharded.py: fsdp, tests/train/test_zero.py: deepspeed), and reading what the
runs left: per-step losses, gradient norms, the exported weights.

The run is tests/train/_sharded_run.py (the real CLI with probes); the model is a tiny random
2-layer ERNIE on the shipped ernie-tiny-zh tokenizer, 4 steps of 8 reviews, dropout off, fp32
unless an override says otherwise. Every launch must exit as expected, and never with gloo's
abort at exit ("terminate called").
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file

import nlp

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
MODEL = Path(nlp.__file__).parent / "assets" / "ernie-tiny-zh"
TIMEOUT = 300  # seconds per launch, generous: the machine may be busy


def overrides(out: Path, batching: str = "dynamic", *extra: str) -> list[str]:
    packed = ["train.data.pack_max_length=96"] if batching == "packed" else []
    return [
        "model.name=null", "model.preset=ernie-3.0-tiny-pico-v2-zh", "model.init=random",
        f"tokenizer.name={MODEL}",
        "model.config.num_hidden_layers=2", "model.config.hidden_size=32",
        "model.config.num_attention_heads=2", "model.config.intermediate_size=64",
        "model.config.max_position_embeddings=512",
        "model.config.hidden_dropout_prob=0", "model.config.attention_probs_dropout_prob=0",
        "data.max_length=64", "data.max_train_samples=64",
        # 9 dev examples, 1 per process and batch: rank 0 runs one forward more than rank 1, which
        # a sharded model's evaluation must match (its forward is a collective)
        "data.max_eval_samples=9", "train.data.eval_batch_size=2",
        "train.max_steps=4", "train.data.batch_size=8", f"train.data.batching={batching}", *packed,
        "train.mixed_precision=no", "train.optim.lr=5e-3", "train.eval.every_steps=null",
        "train.log.every_steps=1", "train.log.progress_bar=false", "train.log.tensorboard=false",
        "train.log.plots=false", f"train.output_dir={out}", *extra,
    ]


def env(gpus: bool = False) -> dict[str, str]:
    env = dict(os.environ)
    if not gpus:  # gloo CPU processes, also on a machine with GPUs
        env["CUDA_VISIBLE_DEVICES"] = ""
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    env["OMP_NUM_THREADS"] = "1"
    for k in [k for k in env if k.startswith(("ACCELERATE_", "TORCHELASTIC_")) or k in ("RANK", "WORLD_SIZE")]:
        del env[k]
    return env


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def command(probes: Path, processes: int, overrides: list[str], *probe_args: str) -> list[str]:
    script = [str(HERE / "_sharded_run.py"), *probe_args, str(probes), "--", "finetune",
              "recipes/sentiment-reviews.yaml", *overrides]
    if processes == 1:
        return [sys.executable, *script]
    return [sys.executable, "-m", "torch.distributed.run", "--nnodes", "1", "--nproc-per-node", str(processes),
            "--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{free_port()}", *script]


def run(probes: Path, processes: int, overrides: list[str], expect: int = 0,
         gpus: bool = False) -> subprocess.CompletedProcess:
    done = subprocess.run(command(probes, processes, overrides), cwd=REPO, env=env(gpus), capture_output=True,
                          text=True, timeout=TIMEOUT)
    assert done.returncode == expect, done.stderr[-4000:]
    assert "terminate called" not in done.stderr, done.stderr[-4000:]
    return done


def losses(out: Path) -> dict[int, float]:
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text(encoding="utf-8").splitlines()]
    return {r["step"]: r["loss"] for r in rows if r["type"] == "train"}


def weights(out: Path) -> dict[str, torch.Tensor]:
    return load_file(str(out / "model" / "model.safetensors"))


def assert_same_weights(got: dict[str, torch.Tensor], want: dict[str, torch.Tensor], rel: float) -> None:
    assert set(got) == set(want)
    diff = torch.cat([(got[k] - want[k]).flatten() for k in want]).norm()
    assert float(diff) <= rel * float(torch.cat([v.flatten() for v in want.values()]).norm())
    for k in want:  # and no tensor off on its own (the norm above could hide a small one)
        torch.testing.assert_close(got[k], want[k], rtol=1e-4, atol=1e-5)  # an untrained shard: ~1e-2


def grad_norms(out: Path) -> dict[int, float]:
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text(encoding="utf-8").splitlines()]
    return {r["step"]: r["grad_norm"] for r in rows if r["type"] == "train"}


def wait_for(paths: list[Path], proc: subprocess.Popen, what: str) -> None:
    deadline = time.monotonic() + TIMEOUT
    while not all(p.exists() for p in paths):
        if proc.poll() is not None:
            raise AssertionError(f"the run ended (rc {proc.returncode}) before {what}: {proc.communicate()[1][-4000:]}")
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)
    time.sleep(0.2)


def kill_during_save(probes: Path, overrides: list[str], step: int) -> None:
    """Run 2 processes until both are writing the checkpoint of `step` (the probe's hang), then
    kill -9 them: the checkpoint is left half-written in its temporary directory."""
    saving = [probes / "saving-rank0", probes / "saving-rank1"]
    proc = subprocess.Popen(command(probes, 2, overrides, "--hang-at-save", str(step)), cwd=REPO, env=env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        wait_for(saving, proc, f"the save of step {step}")
        for p in saving:
            os.kill(json.loads(p.read_text())["pid"], signal.SIGKILL)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=60)


_REFERENCES: dict[tuple[str, ...], Path] = {}


def reference_run(tmp_path_factory: Any, batching: str, *extra: str) -> Path:
    """One plain process's run (nothing to shard) per batching and settings: run once per test
    session and shared by every module that compares a sharded run with it."""
    key = (batching, *extra)
    if key not in _REFERENCES:
        out = tmp_path_factory.mktemp(f"one-{batching}") / "run"
        run(out.parent / "probes", 1, overrides(out, batching, *extra))
        _REFERENCES[key] = out
    return _REFERENCES[key]


def stop_after(probes: Path, overrides: list[str], step: int, processes: int) -> tuple[int, str]:
    """Launch `processes`, send SIGTERM to every one once it has done `step`; (exit code, stderr).
    An abort at exit fails the calling test."""
    stops = [probes / f"stop-rank{r}.json" for r in range(processes)]
    proc = subprocess.Popen(command(probes, processes, overrides, "--stop-step", str(step)), cwd=REPO, env=env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        wait_for(stops, proc, f"step {step}")
        for p in stops:
            os.kill(json.loads(p.read_text())["pid"], signal.SIGTERM)
        _, err = proc.communicate(timeout=TIMEOUT)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert "terminate called" not in err, err[-4000:]
    return proc.returncode, err
