"""Running a command under `accelerate launch` / `torchrun` (2 gloo CPU processes) from a test.

No failure is excused: a rank that aborts at exit with gloo's teardown signature (std::terminate
in a worker thread) fails its test like any other crash, even when the run had written
everything. The Trainer ends the process group so that this does not happen
(Trainer._end_process_group: the wrappers, optimizer state and device mesh that hold the group
are dropped and collected, every process meets, then the group is destroyed); a test that
tolerated the abort would hide the next crash of the same kind.
"""

from __future__ import annotations

import subprocess
from typing import Any

TEARDOWN_ABORT = "terminate called"


def run_launched(cmd: list[str], **kwargs: Any) -> subprocess.CompletedProcess:
    """subprocess.run, capturing text output; fails the calling test on an abort at exit."""
    done = subprocess.run(cmd, capture_output=True, text=True, **kwargs)
    assert TEARDOWN_ABORT not in done.stderr, f"a process aborted (rc {done.returncode}):\n{done.stderr[-4000:]}"
    return done
