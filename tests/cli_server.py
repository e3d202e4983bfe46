"""`nlp serve` as a user starts it, for the CLI tests: a subprocess on a free loopback port,
ready when /health answers 200, stopped with SIGTERM (which must exit 0) when the block ends."""

from __future__ import annotations

import contextlib
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence

import httpx


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def cli_server(target: str, args: Sequence[str] = (), *, env: dict[str, str] | None = None,
               ready_timeout: float = 300) -> Iterator[str]:
    """Yield the base URL of `nlp serve TARGET ARGS...` once it is ready."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen([sys.executable, "-m", "nlp", "serve", target, "--host", "127.0.0.1",
                             "--port", str(port), *args],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + ready_timeout
        while True:
            assert proc.poll() is None, proc.communicate()[1]
            try:
                if httpx.get(url + "/health", timeout=5).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "the server did not get ready"
            time.sleep(0.5)
        yield url
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            assert proc.wait(timeout=60) == 0, proc.communicate()[1]
        finally:
            if proc.poll() is None:
                proc.kill()
