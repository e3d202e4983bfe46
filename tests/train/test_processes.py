"""Tests that start real processes: SIGTERM -> resumable checkpoint; 2-process data-parallel."""

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from launched import run_launched
import torch
from safetensors.torch import load_file

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
import _toy  # noqa: E402

from nlp.train import Trainer  # noqa: E402

REPO = HERE.parent.parent


def _env():
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    for k in [k for k in env if k.startswith("ACCELERATE_")]:
        del env[k]
    return env


def test_sigterm_writes_a_checkpoint_and_the_run_resumes_exactly(tmp_path):
    out, marker = tmp_path / "run", tmp_path / "marker"
    proc = subprocess.Popen(
        [sys.executable, str(HERE / "_toy.py"), str(out), "--epochs", "3",
         "--sleep", "0.2", "--marker", str(marker), "--marker-step", "3"],
        env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    deadline = time.monotonic() + 120
    while not marker.exists():
        assert proc.poll() is None, proc.communicate()[1]
        assert time.monotonic() < deadline, "the training subprocess never reached step 3"
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert "stopped by signal 15" in err
    state = json.loads((sorted((out / "checkpoints").glob("step-*"))[-1] / "trainer_state.json").read_text())
    assert 3 <= state["step"] < 18  # stopped mid-run, on a step boundary

    resumed = _toy.make_trainer(out, epochs=3, eval__every_steps=None).train()
    reference = _toy.make_trainer(tmp_path / "ref", epochs=3, eval__every_steps=None).train()
    assert resumed.step == reference.step == 18
    assert _toy.losses(out) == pytest.approx(_toy.losses(tmp_path / "ref"), abs=1e-6, rel=0)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_cpu_processes_match_one_process_with_the_same_global_batch(tmp_path):
    ranks = tmp_path / "ranks"
    ranks.mkdir()
    cmd = [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2",
           "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no",
           "--main_process_port", str(_free_port()),
           str(HERE / "_toy.py"), str(tmp_path / "ddp"), "--epochs", "1", "--no-eval",
           "--params-file", str(tmp_path / "ddp.safetensors"), "--ranks-dir", str(ranks)]
    done = run_launched(cmd, env=_env(), timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    seen = sorted(json.loads(p.read_text())["rank"] for p in ranks.glob("rank*.json"))
    worlds = {json.loads(p.read_text())["world"] for p in ranks.glob("rank*.json")}
    assert seen == [0, 1] and worlds == {2}  # really two ranks

    torch.manual_seed(0)
    single = Trainer(_toy.ToyClassifier(dropout=0.0),
                     _toy.settings(tmp_path / "one", epochs=1, eval__every_steps=None),
                     train_dataset=_toy.make_dataset(), collate_fn=_toy.collate)
    single.train()
    ddp = load_file(str(tmp_path / "ddp.safetensors"))
    one = single.accelerator.unwrap_model(single._model).state_dict()
    assert set(ddp) == set(one)
    moved = sum(float((one[k] - _toy_init()[k]).abs().sum()) for k in one)
    assert moved > 0.1  # the parameters did train
    for k in one:
        torch.testing.assert_close(ddp[k], one[k], rtol=1e-4, atol=1e-5)
    summary = json.loads((tmp_path / "ddp" / "summary.json").read_text())
    assert summary["processes"] == 2 and summary["steps"] == 6


def _toy_init():
    torch.manual_seed(0)
    return _toy.ToyClassifier(dropout=0.0).state_dict()


def test_kill_9_before_the_first_checkpoint_then_the_same_command_starts_over(tmp_path):
    """SIGKILL leaves no checkpoint, only the run's settings and log: running the same command
    again trains from scratch (with a warning) instead of refusing the directory."""
    out, marker = tmp_path / "run", tmp_path / "marker"
    cmd = [sys.executable, str(HERE / "_toy.py"), str(out), "--epochs", "1", "--no-eval",
           "--sleep", "0.2", "--marker", str(marker), "--marker-step", "2"]
    proc = subprocess.Popen(cmd, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not marker.exists():
        assert proc.poll() is None, proc.communicate()[1]
        assert time.monotonic() < deadline, "the training subprocess never reached step 2"
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=60)
    assert (out / "settings.json").is_file() and not list(out.glob("checkpoints/step-*"))
    again = subprocess.run([c for c in cmd if c not in ("--marker", str(marker))], env=_env(),
                           capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "before its first checkpoint" in again.stderr
    assert sorted(_toy.losses(out)) == [1, 2, 3, 4, 5, 6]
