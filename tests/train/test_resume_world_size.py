"""A sharded run stopped on 2 processes and resumed on 1 continues the unbroken run's curve,
including the first log record after the resume, whose window spans both sessions (the window
summed over 2 processes is rescaled to the 1 process that goes on). Dropout off, fp32; the
checkpoint of the stop falls inside a log window (log every 4 steps, stopped after step 6)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _sharded_launch import (  # noqa: E402
    assert_same_weights,
    losses,
    overrides,
    reference_run,
    run,
    stop_after,
    weights,
)

SAME = ("train.max_steps=12", "train.log.every_steps=4", "train.checkpoint.every_steps=4")


@pytest.mark.parametrize(("before", "after"), [(2, 1), (1, 2)])
def test_fsdp_resumed_on_another_world_size_continues_the_same_curve(tmp_path, tmp_path_factory, before, after):
    reference = reference_run(tmp_path_factory, "dynamic", *SAME)
    want = losses(reference)
    assert sorted(want) == [4, 8, 12]
    out, probes = tmp_path / "run", tmp_path / "probes"
    args = overrides(out, "dynamic", "train.distributed.strategy=fsdp", *SAME)
    rc, err = stop_after(probes, args, 6, before)
    assert rc != 0 and "stopped by signal 15 at step 6/12" in err, err[-4000:]  # torchrun: 1, alone: 143
    done = run(probes / "resumed", after, args)
    assert f"saved with {before} processes on {after}" in done.stderr
    # step 8's record averages steps 5-8: two from each session
    assert losses(out) == pytest.approx(want, rel=1e-6, abs=0)
    assert_same_weights(weights(out), weights(reference), rel=1e-6)
