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
    - `no_range = True`: ignore Range and always send the whole file with 200;
    - `answers[path] = [(status, headers), ...]`: the next GETs answer these (e.g. 429 + Retry-After);
    - `no_length.add(path)`: no Content-Length, the end of the body is the end of the connection;
    - `varying.add(path)`: every GET's body differs (a counter replaces the first bytes);
    - `etag = True`: send `ETag: "<sha256>"`; `if_range = True`: honour `If-Range` (200 when it differs).
    Honours `Range: bytes=a-` with 206 otherwise (416 when a is past the end). Records each GET's
    Range header (None if absent).
    """

    def __init__(self, files: dict[str, bytes]):
        self.files = files
        self.drop_after: dict[str, int] = {}
        self.corrupt: set[str] = set()
        self.ranges: list[str | None] = []
        self.fail: dict[str, int] = {}
        self.no_range = False
        self.answers: dict[str, list[tuple[int, dict]]] = {}
        self.no_length: set[str] = set()
        self.varying: set[str] = set()
        self.etag = False
        self.if_range = False
        self.if_ranges: list[str | None] = []
        self.gets = 0
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep pytest output clean
                pass

            def do_GET(self):
                path = self.path.lstrip("/")
                if path not in outer.files:
                    self.send_error(404)
                    return
                outer.gets += 1
                if outer.fail.get(path):
                    outer.fail[path] -= 1
                    outer.ranges.append("503")
                    self.send_error(503)
                    return
                if outer.answers.get(path):
                    status, headers = outer.answers[path].pop(0)
                    outer.ranges.append(str(status))
                    self.send_response(status)
                    for k, v in headers.items():
                        self.send_header(k, v)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                data = outer.files[path]
                if path in outer.varying:
                    data = str(outer.gets).encode().rjust(8, b"0") + data[8:]
                if path in outer.corrupt:
                    mid = len(data) // 2
                    data = data[:mid] + bytes([data[mid] ^ 0xFF]) + data[mid + 1 :]
                rng = self.headers.get("Range")
                outer.ranges.append(rng)
                outer.if_ranges.append(self.headers.get("If-Range"))
                etag = f'"{sha(data)}"'
                if outer.no_range or (outer.if_range and self.headers.get("If-Range") not in (None, etag)):
                    rng = None
                start = int(rng.split("=")[1].split("-")[0]) if rng else 0
                if start >= len(data) > 0:
                    self.send_response(416)
                    self.send_header("Content-Range", f"bytes */{len(data)}")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                body = data[start:]
                self.send_response(206 if rng else 200)
                if outer.etag:
                    self.send_header("ETag", etag)
                if rng:
                    self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
                if path not in outer.no_length:
                    self.send_header("Content-Length", str(len(body)))
                else:
                    self.close_connection = True
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


class LyingHub:
    """A Hugging Face-protocol server (the endpoints `nlp hub serve` has) that can lie.

    `served[path]`: the bytes a GET returns; `announced[path]`: the bytes the metadata (tree LFS oid,
    ETag, X-Linked-Etag, sizes) describes, by default the served ones. A path listed in
    `announced` only is listed but answers 404.
    """

    COMMIT = "c" * 40

    def __init__(self, served: dict[str, bytes], announced: dict[str, bytes] | None = None):
        from starlette.applications import Starlette
        from starlette.responses import JSONResponse, Response
        from starlette.routing import Route

        self.served = served
        self.announced = dict(served, **(announced or {}))
        outer = self

        def git_sha1(data: bytes) -> str:
            return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()

        async def info(request):
            return JSONResponse({"id": "team/m", "sha": outer.COMMIT, "siblings": [{"rfilename": n} for n in outer.announced]})

        async def tree(request):
            return JSONResponse([
                {"type": "file", "path": n, "size": len(d), "oid": git_sha1(d),
                 "lfs": {"oid": sha(d), "size": len(d), "pointerSize": 134}}
                for n, d in outer.announced.items()
            ])

        async def resolve(request):
            name = request.path_params["file"]
            if name not in outer.served:
                return Response(status_code=404, headers={"X-Error-Code": "EntryNotFound"})
            data, ann = outer.served[name], outer.announced[name]
            headers = {"X-Repo-Commit": outer.COMMIT, "ETag": f'"{sha(ann)}"', "X-Linked-Etag": f'"{sha(ann)}"',
                       "X-Linked-Size": str(len(ann)), "Content-Length": str(len(data))}
            return Response(b"" if request.method == "HEAD" else data, headers=headers)

        app = Starlette(routes=[
            Route("/api/models/{owner}/{name}", info),
            Route("/api/models/{owner}/{name}/revision/{rev}", info),
            Route("/api/models/{owner}/{name}/tree/{rev}", tree),
            Route("/{owner}/{name}/resolve/{rev}/{file:path}", resolve, methods=["GET", "HEAD"]),
        ])
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="error"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.time() + 10
        while not self.server.started:
            if time.time() > deadline:
                raise RuntimeError("lying hub did not start")
            time.sleep(0.02)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(5)
