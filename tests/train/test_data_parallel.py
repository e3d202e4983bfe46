"""`data.batch_size` is global: `nlp finetune` on 2 gloo CPU processes logs the same losses, step
by step, as on 1 process, for every batching (issue 14, section 3). Dropout off, fp32.

A tiny random model on the shipped ernie-tiny-zh tokenizer (no tokenizer training), 4 steps of
8 reviews. Packed batching also checks the loss weighting across processes: the two halves of
a global batch hold different numbers of sequences, and each process's mean loss must count
as its share of the global mean.
"""

from __future__ import annotations

import json
import os
import socket
import sys
from pathlib import Path

import pytest
from launched import run_launched

import nlp

REPO = Path(__file__).resolve().parents[2]
MODEL = Path(nlp.__file__).parent / "assets" / "ernie-tiny-zh"


def _overrides(out: Path, batching: str) -> list[str]:
    extra = ["train.data.pack_max_length=96"] if batching == "packed" else []
    return [
        "model.name=null", "model.preset=ernie-3.0-tiny-pico-v2-zh", "model.init=random",
        f"tokenizer.name={MODEL}",
        "model.config.num_hidden_layers=1", "model.config.hidden_size=32",
        "model.config.num_attention_heads=2", "model.config.intermediate_size=64",
        "model.config.max_position_embeddings=512",
        "model.config.hidden_dropout_prob=0", "model.config.attention_probs_dropout_prob=0",
        "data.max_length=64", "data.max_train_samples=64", "data.max_eval_samples=8",
        "train.max_steps=4", "train.data.batch_size=8", f"train.data.batching={batching}", *extra,
        "train.mixed_precision=no", "train.optim.lr=5e-3", "train.eval.every_steps=null",
        "train.log.every_steps=1", "train.log.progress_bar=false", "train.log.tensorboard=false",
        "train.log.plots=false", f"train.output_dir={out}",
    ]


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    env["OMP_NUM_THREADS"] = "1"
    for k in [k for k in env if k.startswith("ACCELERATE_")]:
        del env[k]
    return env


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _train_losses(out: Path) -> dict[int, float]:
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text(encoding="utf-8").splitlines()]
    return {r["step"]: r["loss"] for r in rows if r["type"] == "train"}


def _finetune(out: Path, batching: str, processes: int, recipe: str = "recipes/sentiment-reviews.yaml") -> None:
    launcher = [sys.executable, "-m", "nlp"] if processes == 1 else [
        sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", str(processes),
        "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no",
        "--main_process_port", str(_free_port()), "-m", "nlp"]
    done = run_launched([*launcher, "finetune", recipe, *_overrides(out, batching)],
                        cwd=REPO, env=_env(), timeout=400)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert summary["processes"] == processes and summary["steps"] == 4


@pytest.mark.parametrize("batching", ["dynamic", "length_grouped", "packed"])
def test_two_processes_log_the_losses_of_one(tmp_path, batching):
    _finetune(tmp_path / "one", batching, 1)
    _finetune(tmp_path / "two", batching, 2)
    one, two = _train_losses(tmp_path / "one"), _train_losses(tmp_path / "two")
    assert sorted(one) == [1, 2, 3, 4] and sorted(two) == sorted(one)
    assert len(set(one.values())) > 1  # the model did train
    assert two == pytest.approx(one, rel=1e-5, abs=0)


def test_two_processes_contrast_with_the_whole_batch_like_one(tmp_path):
    """Embeddings: each process's queries are scored against the positives of the global batch
    (gathered across processes: the recipe's dense vectors and lexical weights both), so 2
    processes log the losses of 1, and the group ends without an abort (run_launched)."""
    _finetune(tmp_path / "one", "dynamic", 1, "recipes/embedding-titles.yaml")
    _finetune(tmp_path / "two", "dynamic", 2, "recipes/embedding-titles.yaml")
    one, two = _train_losses(tmp_path / "one"), _train_losses(tmp_path / "two")
    assert sorted(one) == [1, 2, 3, 4] and len(set(one.values())) > 1
    assert two == pytest.approx(one, rel=1e-5, abs=0)
