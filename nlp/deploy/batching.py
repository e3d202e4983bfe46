"""Dynamic batching: requests that arrive together run as one batch (Triton's idea).

    batcher = DynamicBatcher(run_batch, max_batch_tokens=4096, max_wait_s=0.005, max_queue=1024)
    batcher.start()
    future = batcher.submit(job)          # QueueFull when `max_queue` inputs are already in
    result = future.result()              # (or `await asyncio.wrap_future(future)`)

One worker thread takes the oldest job, waits up to `max_wait_s` (counted from that job's
arrival) for more jobs with the same key, then runs every waiting job with that key that fits
the token budget through `run_batch` at once. The budget counts padded tokens: jobs' windows
times the longest window, since a batch is padded to its longest row. A job that alone exceeds
the budget runs alone. Each job's future gets its own share of the results; when a batch
fails, its jobs are retried one at a time so that one bad request fails alone.

Stopping (a server's drain): `begin_stop(cutoff)` refuses new jobs and keeps running queued
ones until the monotonic time `cutoff`; then every job not answered yet fails with
ShuttingDown (a 503 with Retry-After), and a batch that `run_batch` abandons by raising
ShuttingDown (between its forward passes) is not retried. So the worker is idle by the cutoff,
however long the backlog, and the process can exit while no native code runs in that thread.
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["BatchStats", "DynamicBatcher", "Job", "QueueFull", "ShuttingDown"]

logger = logging.getLogger(__name__)


class QueueFull(Exception):
    """The queue holds `max_queue` inputs already: answer 429, retry later."""


class ShuttingDown(Exception):
    """The batcher is stopping and will not (or no longer) run this job: answer 503, retry elsewhere."""


@dataclass
class Job:
    """One request's inputs and what they cost."""

    items: list[Any]
    key: Hashable = ()       # jobs with equal keys may share a batch (same pipeline keywords)
    rows: int = 1            # windows the items make
    row_tokens: int = 1      # tokens of the longest window
    future: concurrent.futures.Future = field(default_factory=concurrent.futures.Future)
    arrived: float = field(default_factory=time.monotonic)


@dataclass
class BatchStats:
    """What one batch was made of (for the metrics)."""

    requests: int
    inputs: int
    padded_tokens: int
    seconds: float


class DynamicBatcher:
    """A bounded queue of jobs and the worker thread that batches them (see the module doc).

    `run_batch(key, jobs)` returns one list of results per job, in order; it runs in the
    worker thread. `on_batch(stats)` is called after each batch; `on_idle()` once the
    queue has stayed empty for `idle_s` seconds after a batch (the worker is then at rest).
    """

    def __init__(self, run_batch: Callable[[Hashable, list[Job]], list[list[Any]]], *, max_batch_tokens: int,
                 max_wait_s: float, max_queue: int, max_batch_requests: int | None = None,
                 on_batch: Callable[[BatchStats], None] | None = None,
                 on_idle: Callable[[], None] | None = None, idle_s: float = 0.5) -> None:
        if max_batch_tokens < 1 or max_queue < 1 or max_wait_s < 0:
            raise ValueError(f"max_batch_tokens={max_batch_tokens}, max_queue={max_queue} must be >= 1 and "
                             f"max_wait_s={max_wait_s} >= 0")
        self._run_batch = run_batch
        self.max_batch_tokens = max_batch_tokens
        self.max_wait_s = max_wait_s
        self.max_queue = max_queue
        self.max_batch_requests = max_batch_requests or None
        self._on_batch = on_batch
        self._on_idle = on_idle
        self.idle_s = idle_s
        self._ran_since_idle = False
        self._pending: deque[Job] = deque()
        self._depth = 0  # inputs waiting or running
        self._cond = threading.Condition()
        self._stopping = False
        self._cutoff = float("inf")  # monotonic time after which no job runs (begin_stop)
        self._thread: threading.Thread | None = None

    @property
    def depth(self) -> int:
        """Inputs accepted and not yet answered (waiting or in the running batch)."""
        return self._depth

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="nlp-serve-batcher", daemon=True)
        self._thread.start()

    def submit(self, job: Job) -> concurrent.futures.Future:
        n = len(job.items)
        with self._cond:
            if self._stopping:
                raise ShuttingDown("the server is shutting down")
            if self._depth + n > self.max_queue:
                raise QueueFull(f"{self._depth} inputs queued; the queue holds {self.max_queue} (--max-queue)")
            self._depth += n
            self._pending.append(job)
            self._cond.notify()
        return job.future

    def begin_stop(self, cutoff: float | None = None) -> None:
        """Refuse new jobs; run those queued until the monotonic time `cutoff` (default: all of
        them), then fail the rest with ShuttingDown (see the module docstring)."""
        with self._cond:
            self._stopping = True
            if cutoff is not None:
                self._cutoff = min(self._cutoff, cutoff)
            self._cond.notify()

    def past_cutoff(self) -> bool:
        """True once a stop's cutoff has passed: a running batch should be abandoned."""
        return time.monotonic() >= self._cutoff

    def stop(self, timeout: float | None = None) -> bool:
        """Refuse new jobs, finish those already queued (within a cutoff set by begin_stop), then
        end the worker thread; waits at most `timeout` seconds. True when the worker ended."""
        self.begin_stop()
        if self._thread is not None:
            self._thread.join(timeout)
            return not self._thread.is_alive()
        return True

    # ---------------------------------------------------------------- worker thread

    def _select(self, key: Hashable) -> tuple[list[Job], bool]:
        """The oldest jobs with `key` that fit one batch, and whether a limit (not the end of the
        queue) stopped the selection. Caller holds the lock."""
        chosen: list[Job] = []
        rows = longest = 0
        for job in self._pending:
            if job.key != key:
                continue
            if chosen and self.max_batch_requests and len(chosen) >= self.max_batch_requests:
                return chosen, True
            new_longest = max(longest, job.row_tokens)
            if chosen and (rows + job.rows) * new_longest > self.max_batch_tokens:
                return chosen, True
            chosen.append(job)
            rows, longest = rows + job.rows, new_longest
        full = bool(self.max_batch_requests and len(chosen) >= self.max_batch_requests) \
            or rows * longest >= self.max_batch_tokens
        return chosen, full

    def _next_batch(self) -> list[Job] | None:
        """The next batch; None when stopping; [] when the queue went idle after work."""
        with self._cond:
            if self._stopping and self.past_cutoff():
                self._fail_pending()
            while not self._pending:
                if self._stopping:
                    return None
                waiting_for_idle = self._ran_since_idle and self._on_idle is not None
                if not self._cond.wait(self.idle_s if waiting_for_idle else None) and waiting_for_idle:
                    self._ran_since_idle = False
                    return []
            key = self._pending[0].key
            deadline = self._pending[0].arrived + self.max_wait_s
            while True:
                jobs, full = self._select(key)
                remaining = deadline - time.monotonic()
                if full or remaining <= 0 or self._stopping:
                    break
                self._cond.wait(remaining)
            for job in jobs:
                self._pending.remove(job)
            return jobs

    def _fail_pending(self) -> None:
        """Fail every queued job with ShuttingDown. Caller holds the lock."""
        jobs = list(self._pending)
        self._pending.clear()
        for job in jobs:
            self._depth -= len(job.items)
            if job.future.set_running_or_notify_cancel():
                job.future.set_exception(ShuttingDown("the server is shutting down; its drain timeout passed "
                                                      "before this request could run"))

    def _loop(self) -> None:
        while (jobs := self._next_batch()) is not None:
            if not jobs:
                self._idle()
                continue
            self._ran_since_idle = True
            self._run(jobs)

    def _idle(self) -> None:
        assert self._on_idle is not None
        try:
            self._on_idle()
        except Exception:  # noqa: BLE001 - housekeeping must not stop the worker
            logger.exception("on_idle failed")

    def _run(self, jobs: list[Job]) -> None:
        start = time.perf_counter()
        try:
            results = self._run_batch(jobs[0].key, jobs)
            if len(results) != len(jobs):
                raise RuntimeError(f"run_batch returned {len(results)} results for {len(jobs)} jobs")
        except Exception as err:  # noqa: BLE001 - isolate the job that failed
            if len(jobs) == 1 or isinstance(err, ShuttingDown):  # abandoned by a drain: no retries
                for job in jobs:
                    self._finish(job, error=err)
            else:
                logger.debug("a batch of %d requests failed (%s); running them one by one", len(jobs), err)
                for job in jobs:
                    self._run([job])
            return
        stats = BatchStats(requests=len(jobs), inputs=sum(len(j.items) for j in jobs),
                           padded_tokens=sum(j.rows for j in jobs) * max(j.row_tokens for j in jobs),
                           seconds=time.perf_counter() - start)
        for job, result in zip(jobs, results):
            self._finish(job, result=result)
        if self._on_batch is not None:
            self._on_batch(stats)

    def _finish(self, job: Job, *, result: Any = None, error: BaseException | None = None) -> None:
        with self._cond:
            self._depth -= len(job.items)
        if job.future.set_running_or_notify_cancel():
            if error is not None:
                job.future.set_exception(error)
            else:
                job.future.set_result(result)
