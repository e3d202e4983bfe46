"""Servers and helpers for the hub tests, all on 127.0.0.1 with an OS-chosen port (imported by conftest.py)."""

from __future__ import annotations

import hashlib
import http.server
import socket
import threading
import time
from pathlib import Path

import uvicorn

from nlp.hub.server import create_app, server_options


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class MirrorServer:
    """`nlp hub serve` (the real app under uvicorn) in a background thread."""

    def __init__(self, root: Path, token: str | None = None, **options):
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(
            create_app(root, token=token), host="127.0.0.1", port=self.port, log_level="error", **server_options(**options)
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.time() + 10
        while not self.server.started:
            if time.time() > deadline:
                raise RuntimeError("mirror server did not start")
            time.sleep(0.02)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(5)


def make_repo(root: Path, repo: str, files: dict[str, bytes]) -> Path:
    d = root / repo
    for name, data in files.items():
        (d / name).parent.mkdir(parents=True, exist_ok=True)
        (d / name).write_bytes(data)
    return d


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class FlakyServer:
    """A plain HTTP file server whose misbehaviour the test sets per path.

    - `drop_after[path] = n`: the first GET sends n bytes of the body, then closes the connection;
    - `corrupt.add(path)`: every GET flips a byte in the middle of the body;
    - `fail[path] = n`: the next n GETs answer 503;
    - `no_range = True`: ignore Range and always send the whole file with 200.
    Honours `Range: bytes=a-` with 206 otherwise. Records each GET's Range header (None if absent).
    """

    def __init__(self, files: dict[str, bytes]):
        self.files = files
        self.drop_after: dict[str, int] = {}
        self.corrupt: set[str] = set()
        self.ranges: list[str | None] = []
        self.fail: dict[str, int] = {}
        self.no_range = False
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep pytest output clean
                pass

            def do_GET(self):
                path = self.path.lstrip("/")
                if path not in outer.files:
                    self.send_error(404)
                    return
                if outer.fail.get(path):
                    outer.fail[path] -= 1
                    outer.ranges.append("503")
                    self.send_error(503)
                    return
                data = outer.files[path]
                if path in outer.corrupt:
                    mid = len(data) // 2
                    data = data[:mid] + bytes([data[mid] ^ 0xFF]) + data[mid + 1 :]
                rng = self.headers.get("Range")
                outer.ranges.append(rng)
                if outer.no_range:
                    rng = None
                start = int(rng.split("=")[1].split("-")[0]) if rng else 0
                body = data[start:]
                self.send_response(206 if rng else 200)
                if rng:
                    self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                cut = outer.drop_after.pop(path, None)
                if cut is not None:
                    self.wfile.write(body[:cut])
                    self.wfile.flush()
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                self.wfile.write(body)

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()
