"""Give freed heap memory back to the OS while serving (glibc's `malloc_trim`).

A server's batches vary in shape with every mix of requests, so the C heap that PyTorch and
oneDNN allocate from holds freed blocks of every size, which glibc keeps. (What grew a PyTorch
server most, per-shape kernels, is bounded elsewhere: padded lengths and GEMM row buckets,
nlp/deploy/server_model.py.) Fixing glibc's mmap threshold instead halves the throughput (every
large tensor becomes an mmap/munmap pair). `malloc_trim(0)` every few seconds, in the batch
worker between batches, returns the free pages at the cost of a millisecond or so; and once more
when the queue goes idle, so that a server at rest holds no freed batch memory.

    trimmer = HeapTrimmer(every_s=2.0)
    trimmer.maybe_trim()      # after each batch: trims when `every_s` has passed
    trimmer.trim()            # when the server goes idle
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import time

__all__ = ["HeapTrimmer"]

logger = logging.getLogger(__name__)


def _malloc_trim():
    """glibc's malloc_trim, or None (musl, macOS, Windows: nothing to do)."""
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        fn = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_size_t]
    fn.restype = ctypes.c_int
    return fn


class HeapTrimmer:
    """Calls malloc_trim(0) at most once per `every_s` seconds (never where there is none)."""

    def __init__(self, every_s: float = 2.0) -> None:
        self.every_s = every_s
        self._trim = _malloc_trim()
        self._last = time.monotonic()
        self.trims = 0

    @property
    def available(self) -> bool:
        return self._trim is not None

    def maybe_trim(self) -> bool:
        """Trim if `every_s` has passed since the last trim; True when it did."""
        if time.monotonic() - self._last < self.every_s:
            return False
        return self.trim()

    def trim(self) -> bool:
        """Trim now; True when there is a malloc_trim to call."""
        if self._trim is None:
            return False
        self._trim(0)
        self._last = time.monotonic()
        self.trims += 1
        return True
