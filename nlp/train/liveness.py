"""Which process of a run stopped answering, for the message of a collective that timed out.

A collective that waits longer than `train.distributed.timeout_s` fails on the processes that
came (nlp.train.strategies sets the timeout on the run's group); by itself its error says only
that a wait timed out. So while a run of several processes trains, each process beats: a
daemon thread writes a counter and the step into the process group's key-value store (the
launcher's rendezvous store, which the processes share) every `interval` seconds. After a
failure, a process reads every beat twice, `interval` apart: a process whose counter did not
move is stopped, hung in native code, or gone. A thread in a process whose main thread is stuck
in Python still beats, so such a process is not named; the message then says so.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

__all__ = ["Liveness", "looks_like_a_timeout"]

logger = logging.getLogger(__name__)

_PREFIX = "nlp/liveness/"
_TIMEOUT_WORDS = ("timed out", "timeout", "connection reset", "connection closed", "broken pipe")


def looks_like_a_timeout(err: BaseException) -> bool:
    """True for the errors a collective gives when another process does not come (gloo, nccl)."""
    text = str(err).lower()
    return isinstance(err, RuntimeError) and any(w in text for w in _TIMEOUT_WORDS)


class Liveness:
    """Beat into the default process group's store; tell which processes stopped beating."""

    def __init__(self, rank: int, world_size: int, interval: float) -> None:
        self.rank, self.world_size, self.interval = rank, world_size, interval
        self.step = 0  # the loop's, written with each beat
        self._store = _default_store()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._count = 0

    def start(self) -> "Liveness":
        if self._store is not None and self._thread is None:
            self._beat()
            self._thread = threading.Thread(target=self._run, name="nlp-liveness", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2 * self.interval)
            self._thread = None

    def _beat(self) -> None:
        self._count += 1
        self._store.set(f"{_PREFIX}{self.rank}", f"{self._count} {self.step}")

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self._beat()
            except Exception:  # the store went (the group ended, the launcher stopped): stop beating
                return

    def silent(self) -> tuple[dict[int, int], bool]:
        """({rank: its last step} of the other processes that did not beat in the last interval,
        whether the store answered). Takes about 1.5 intervals; a store that does not answer
        within a few seconds (its host is the hung process) counts as no answer."""
        if self._store is None:
            return {}, False
        first = self._read_all()
        if first is None:
            return {}, False
        time.sleep(1.5 * self.interval)
        second = self._read_all()
        if second is None:
            return {}, False
        return {r: int(first[r].split()[1]) for r in first if r != self.rank and first[r] == second.get(r)}, True

    def _read_all(self) -> dict[int, str] | None:
        out: dict[int, str] = {}

        def read() -> None:
            for r in range(self.world_size):
                key = f"{_PREFIX}{r}"
                if self._store.check([key]):
                    out[r] = self._store.get(key).decode()

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        reader.join(timeout=max(5.0, 2 * self.interval))
        return None if reader.is_alive() else out

    def explain(self, err: BaseException, timeout_s: float) -> str | None:
        """The message for a run that failed with `err`: which process stopped answering, or
        None when the failure is not a collective's (then nothing is waited for)."""
        if not looks_like_a_timeout(err):
            return None
        silent, answered = self.silent()
        head = (f"rank {self.rank}: a collective waited more than train.distributed.timeout_s={timeout_s:g} "
                f"seconds for the other processes ({str(err).splitlines()[0][:200] if str(err) else type(err).__name__})")
        if silent:
            who = ", ".join(f"rank {r} (last seen at step {s})" for r, s in sorted(silent.items()))
            cause = f"{who} stopped answering: it is stopped, hung, or its node is gone"
        elif answered:
            cause = ("every other process still answers, so one of them is stuck in Python code or waits "
                     "in another collective; raise train.distributed.timeout_s if a step or a save "
                     "legitimately takes longer")
        else:
            cause = "the processes' shared store did not answer: the process that hosts it is the hung one"
        return (f"{head}; {cause}. The run ends here; run the same command again to resume from the "
                "last complete checkpoint.")


def _default_store() -> Any:
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return None
    try:
        from torch.distributed.distributed_c10d import _get_default_store  # no public accessor

        return _get_default_store()
    except (ImportError, RuntimeError, ValueError) as err:
        logger.debug("no process group store for liveness beats: %s", err)
        return None
