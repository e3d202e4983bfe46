"""Turn SIGINT / SIGTERM into "finish this step, save a checkpoint, stop".

Why not stop at once: a step cut in half leaves gradients half-accumulated and nothing
resumable. The first signal only sets a flag that the training loop reads at the next step
boundary; a second signal restores the previous handlers and raises KeyboardInterrupt at once,
for when saving itself hangs.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
from typing import Callable, Iterator

__all__ = ["stop_on_signals"]

logger = logging.getLogger(__name__)


@contextlib.contextmanager
def stop_on_signals(
    on_signal: Callable[[int], None], signums: tuple[int, ...] = (signal.SIGINT, signal.SIGTERM)
) -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        # Python only delivers signals to the main thread; a run started from a worker thread
        # (e.g. a notebook kernel helper) keeps the default behaviour.
        logger.debug("not in the main thread: SIGINT/SIGTERM keep their default handlers")
        yield
        return
    previous = {s: signal.getsignal(s) for s in signums}
    received = 0

    def restore() -> None:
        for s, h in previous.items():
            signal.signal(s, h)

    def handler(signum: int, frame: object) -> None:
        nonlocal received
        received += 1
        if received > 1:
            restore()
            raise KeyboardInterrupt(f"second {signal.Signals(signum).name}: stopping without saving")
        logger.warning(
            "%s received: finishing the current step, saving a checkpoint, then stopping "
            "(send it again to stop at once, without saving)",
            signal.Signals(signum).name,
        )
        on_signal(signum)

    for s in signums:
        signal.signal(s, handler)
    try:
        yield
    finally:
        restore()
