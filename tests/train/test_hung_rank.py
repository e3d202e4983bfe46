"""A process that hangs (SIGSTOP) does not hold the others forever: with
`train.distributed.timeout_s`, the processes that came end with a message naming the silent
rank, the launcher ends the job, and the same command resumes from the last complete
checkpoint. 2 gloo CPU processes under torchrun, the tiny model of the sharded tests."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _sharded_launch import REPO, TIMEOUT, command, env, overrides, run, wait_for  # noqa: E402

TIMEOUT_S = 5  # the setting under test: a collective waits this long for the stopped process


@pytest.mark.parametrize("strategy", ["ddp", "fsdp"])
def test_a_stopped_rank_ends_the_job_with_its_name_and_the_run_resumes(tmp_path, strategy):
    out, probes = tmp_path / "run", tmp_path / "probes"
    args = overrides(out, "dynamic", f"train.distributed.strategy={strategy}", "train.max_steps=100000",
                     "train.checkpoint.every_steps=2", f"train.distributed.timeout_s={TIMEOUT_S}")
    proc = subprocess.Popen(command(probes, 2, args), cwd=REPO, env=env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    stopped = None
    try:
        wait_for([probes / "rank1.json", out / "checkpoints" / "step-00000002"], proc, "step 2's checkpoint")
        stopped = json.loads((probes / "rank1.json").read_text())["pid"]
        os.kill(stopped, signal.SIGSTOP)
        began = time.monotonic()
        _, err = proc.communicate(timeout=TIMEOUT)
        took = time.monotonic() - began
    finally:
        if stopped is not None:
            for sig in (signal.SIGCONT, signal.SIGKILL):
                try:
                    os.kill(stopped, sig)
                except ProcessLookupError:
                    pass
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate(timeout=60)
    assert proc.returncode != 0, err[-4000:]
    # bounded: the timeout, the heartbeat check, then the launcher's grace period before SIGKILL
    assert took < TIMEOUT_S + 90, (took, err[-4000:])
    assert f"rank 0: a collective waited more than train.distributed.timeout_s={TIMEOUT_S} seconds" in err, err[-4000:]
    assert "rank 1 (last seen at step" in err and "stopped answering" in err, err[-4000:]
    assert "run the same command again to resume from the last complete checkpoint" in err

    # the same command (with an end in sight) resumes from the last complete checkpoint
    complete = sorted(p.name for p in (out / "checkpoints").glob("step-*") if (p / "trainer_state.json").is_file())
    last = int(complete[-1].removeprefix("step-"))
    done = run(probes / "again", 2, [*args, f"train.max_steps={last + 2}"])
    assert f"resumed from {out / 'checkpoints' / complete[-1]} at step {last}" in done.stderr, done.stderr[-4000:]
    assert json.loads((out / "summary.json").read_text())["steps"] == last + 2
