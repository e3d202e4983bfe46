"""The distributed strategy is an object (nlp.train.strategies): the engine never names one, and
a strategy defined in tests/ (tests/train/strategy_plugin, registered through
$NLP_STRATEGY_PLUGINS) trains, checkpoints and resumes through `nlp finetune` with no change
inside `nlp/` made for it."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

import nlp
from nlp.train.strategies import PLUGIN_ENV

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _sharded_launch import REPO, env, losses, overrides  # noqa: E402

ENGINE = [Path(nlp.__file__).parent / "train" / name for name in ("trainer.py", "checkpoint.py", "finetune.py")]
# what the project's before-stop hook looks for in the engine
STRATEGY_WORDS = re.compile(r"fsdp|deepspeed|zero\.|is_sharded|strategy ?==|_mesh|dcp_checkpoint|sharding")


def _strategy_lines(path: Path) -> list[str]:
    return [f"{path.name}:{i}: {line.strip()}" for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
            if STRATEGY_WORDS.search(line)]


def test_the_engine_names_no_strategy(tmp_path):
    found = [hit for p in ENGINE for hit in _strategy_lines(p)]
    assert found == [], f"strategy names left in the engine: {found}"
    probe = tmp_path / "probe.py"  # the check can fail
    probe.write_text('def f(s):\n    return s.strategy == "ddp" or zero.is_engine(s)\n', encoding="utf-8")
    assert len(_strategy_lines(probe)) == 1


def _finetune(out: Path, calls: Path, *extra: str, expect: int = 0) -> subprocess.CompletedProcess:
    e = env()
    e[PLUGIN_ENV] = "strategy_plugin"
    e["PYTHONPATH"] = f"{HERE}:{e['PYTHONPATH']}"
    e["ONE_DEVICE_CALLS"] = str(calls)
    done = subprocess.run([sys.executable, "-m", "nlp", "finetune", "recipes/sentiment-reviews.yaml",
                           *overrides(out, "dynamic", "train.checkpoint.every_steps=2",
                                     "train.checkpoint.keep_last=2", *extra)],
                          cwd=REPO, env=e, capture_output=True, text=True, timeout=600)
    assert done.returncode == expect, done.stderr[-4000:]
    return done


def _calls(path: Path) -> list[str]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_a_strategy_from_tests_trains_checkpoints_and_resumes_through_nlp_finetune(tmp_path):
    ddp, plugin, calls = tmp_path / "ddp", tmp_path / "one-device", tmp_path / "calls.jsonl"
    _finetune(ddp, tmp_path / "ddp-calls.jsonl")
    assert not (tmp_path / "ddp-calls.jsonl").exists()  # the default strategy is not the plugin's
    _finetune(plugin, calls, "train.distributed.strategy=one-device")
    assert _calls(calls) == ["prepare", "step", "step", "save", "step", "step", "save", "end"]
    # its own checkpoint format, and the same training as ddp on one process
    step2 = plugin / "checkpoints" / "step-00000002"
    assert (step2 / "one-device" / "state.pt").is_file() and not (step2 / "model.safetensors").exists()
    assert losses(plugin) == pytest.approx(losses(ddp), rel=1e-6, abs=0)
    want = load_file(str(ddp / "model" / "model.safetensors"))
    got = load_file(str(plugin / "model" / "model.safetensors"))
    assert set(got) == set(want)
    for k in want:
        torch.testing.assert_close(got[k], want[k], rtol=1e-5, atol=1e-6)

    # resumed from its own checkpoint of step 2: the same final model
    first = load_file(str(plugin / "model" / "model.safetensors"))
    shutil.rmtree(plugin / "checkpoints" / "step-00000004")
    shutil.rmtree(plugin / "model")
    calls.unlink()
    _finetune(plugin, calls, "train.distributed.strategy=one-device")
    assert _calls(calls) == ["prepare", "load", "step", "step", "save", "end"]
    again = load_file(str(plugin / "model" / "model.safetensors"))
    for k in first:
        torch.testing.assert_close(again[k], first[k], rtol=0, atol=0)

    # a checkpoint of another strategy is refused, naming both
    done = _finetune(ddp, calls, "train.distributed.strategy=one-device", "train.max_steps=6", expect=2)
    assert "written by train.distributed.strategy=ddp (model.safetensors); this run has strategy=one-device" \
        in done.stderr, done.stderr[-3000:]
