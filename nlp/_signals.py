"""Signals that end a command raise where its cleanup can run.

Python turns SIGINT into KeyboardInterrupt, so `except BaseException` / `finally` blocks (a
temporary directory removed, a lock released) run on Ctrl-C. SIGTERM (`kill`, `docker stop`, a
job scheduler's time limit) and SIGHUP (a closed terminal) would end the process at once and
leave half-written temporary directories behind. `terminate_raises` makes them raise SystemExit
instead; the `nlp` command installs it around every subcommand. `signals_held` closes the one
window that remains: a signal landing after a temporary directory is made but before the code
that would remove it holds its name.

Both act only in the main thread, where Python runs signal handlers; elsewhere they change nothing.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from typing import Any, Iterator

__all__ = ["terminate_raises", "signals_held"]

_TERMINATING = (signal.SIGTERM, signal.SIGHUP)
_HELD = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@contextlib.contextmanager
def terminate_raises() -> Iterator[None]:
    """SIGTERM / SIGHUP raise SystemExit(128 + signal number), the exit status the default
    action gives, so that cleanup code runs before the process ends. Only where the default
    action is in place: an ignored SIGHUP (`nohup`) stays ignored, a handler stays."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def raise_exit(signum: int, frame: Any) -> None:
        raise SystemExit(128 + signum)

    previous = {sig: signal.signal(sig, raise_exit) for sig in _TERMINATING
                if signal.getsignal(sig) == signal.SIG_DFL}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """SIGINT, SIGTERM and SIGHUP held back, then raised again on leaving, so that what their
    handlers raise lands where the caller can clean up. (Blocking them with pthread_sigmask would
    not do: a signal sent to the process goes to any thread not blocking it, and torch's threads
    do not.)"""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pending: list[int] = []
    previous = {sig: signal.signal(sig, lambda signum, frame: pending.append(signum))
                for sig in _HELD if signal.getsignal(sig) is not None}  # None: set outside Python
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if pending:
            signal.raise_signal(pending[0])  # to the handlers the caller installed
