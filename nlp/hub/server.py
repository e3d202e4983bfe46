"""A read-only Hugging Face-protocol mirror of a directory of model snapshots.

`nlp hub serve DIR` lets an air-gapped team run its own hub: DIR holds one folder per
repository (`DIR/owner/name/config.json`, ...), and both this toolkit and
`huggingface_hub.snapshot_download(repo, endpoint="http://host:port")` download from it.

The endpoints are the ones huggingface_hub 2.x calls:

- `GET /api/models/{owner}/{name}` and `.../revision/{rev}`: repo info with `sha` and `siblings`;
- `GET /api/models/{owner}/{name}/tree/{rev}[/{path}]`: the file listing, every file described as an
  LFS object so clients verify and name blobs by sha256;
- `GET|HEAD /{owner}/{name}/resolve/{rev}/{file}`: the bytes, with `X-Repo-Commit`, `ETag` and
  `X-Linked-Etag` (sha256), `X-Linked-Size`, `Content-Length`, `Accept-Ranges`; `Range` -> 206.

A repository has one revision: `main`, or its commit id, a sha1 over the listing (path, size,
mtime) so that it changes whenever a file does. Errors carry `X-Error-Code` (RepositoryNotFound,
RevisionNotFound, EntryNotFound) as the real hub does, which huggingface_hub turns into its own
exception classes. Nothing outside DIR is served: path segments `..`/`.`, backslashes, NUL,
absolute paths and symlinks whose target leaves DIR all answer 404.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

__all__ = ["FileHasher", "create_app", "serve"]

logger = logging.getLogger(__name__)

_CHUNK = 1 << 20  # 1 MiB: large enough for loopback throughput, small enough to stream
_SEGMENT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")  # an owner or repo name, as on the Hub


@dataclass(frozen=True)
class _Digest:
    sha256: str
    git_sha1: str  # the git blob id, which the tree listing reports as `oid`


class FileHasher:
    """sha256 (and git blob sha1) of files, computed once per (path, size, mtime).

    A per-path lock makes 32 clients asking for the same new 100 MB file wait for one hash pass
    instead of running 32.
    """

    def __init__(self) -> None:
        self._cache: dict[str, tuple[int, int, _Digest]] = {}
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()

    def digest(self, path: Path) -> _Digest:
        key = str(path)
        with self._guard:
            lock = self._locks.setdefault(key, threading.Lock())
        with lock:
            st = path.stat()
            hit = self._cache.get(key)
            if hit and hit[0] == st.st_size and hit[1] == st.st_mtime_ns:
                return hit[2]
            sha256 = hashlib.sha256()
            sha1 = hashlib.sha1(b"blob %d\0" % st.st_size)
            with open(path, "rb") as f:
                while chunk := f.read(_CHUNK):
                    sha256.update(chunk)
                    sha1.update(chunk)
            digest = _Digest(sha256.hexdigest(), sha1.hexdigest())
            self._cache[key] = (st.st_size, st.st_mtime_ns, digest)
            return digest


def _error(status: int, code: str, message: str) -> Response:
    return JSONResponse(
        {"error": message}, status_code=status, headers={"X-Error-Code": code, "X-Error-Message": message}
    )


class _Mirror:
    """Maps URL paths to files under one root, refusing anything that would leave it."""

    def __init__(self, root: Path, token: str | None) -> None:
        self.root = root.resolve()
        self.token = token
        self.hasher = FileHasher()

    # -- path safety -------------------------------------------------------------------------
    def _inside(self, path: Path) -> Path | None:
        """The real path if it stays under the root after following every symlink."""
        try:
            real = path.resolve(strict=True)
        except (OSError, RuntimeError):
            return None
        if real != self.root and self.root not in real.parents:
            return None
        return real

    def repo_dir(self, owner: str, name: str) -> Path | None:
        if not (_SEGMENT.match(owner) and _SEGMENT.match(name)) or ".." in (owner, name):
            return None
        real = self._inside(self.root / owner / name)
        return real if real is not None and real.is_dir() else None

    def file_in(self, repo: Path, relpath: str) -> Path | None:
        parts = relpath.split("/")
        if not relpath or relpath.startswith("/") or "\\" in relpath or "\0" in relpath:
            return None
        if any(p in ("", ".", "..") or p.startswith(".") for p in parts):
            return None
        real = self._inside(repo.joinpath(*parts))
        if real is None or not real.is_file():  # symlinks may point anywhere inside the root
            return None
        return real

    def listing(self, repo: Path) -> list[tuple[str, Path, os.stat_result]]:
        """Every servable file of a repo, sorted; hidden files and symlinks out of the root skipped."""
        out = []
        for dirpath, dirnames, filenames in os.walk(repo, followlinks=False):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
            for fn in sorted(filenames):
                if fn.startswith("."):
                    continue
                rel = os.path.relpath(os.path.join(dirpath, fn), repo).replace(os.sep, "/")
                real = self.file_in(repo, rel)
                if real is not None:
                    out.append((rel, real, real.stat()))
        return out

    def commit(self, repo: Path) -> str:
        h = hashlib.sha1()
        for rel, _, st in self.listing(repo):
            h.update(f"{rel}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
        return h.hexdigest()

    # -- auth ----------------------------------------------------------------------------------
    def authorized(self, request: Request) -> bool:
        if not self.token:
            return True
        header = request.headers.get("authorization", "")
        scheme, _, given = header.partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(given.strip(), self.token)


def _iter_file(path: Path, start: int, length: int) -> Iterator[bytes]:
    with open(path, "rb") as f:
        f.seek(start)
        left = length
        while left > 0:
            chunk = f.read(min(_CHUNK, left))
            if not chunk:
                return
            left -= len(chunk)
            yield chunk


def _parse_range(header: str, size: int) -> tuple[int, int] | None:
    """(start, end inclusive) of a single `bytes=` range, or None when unsatisfiable/unsupported."""
    m = re.fullmatch(r"\s*bytes=(\d*)-(\d*)\s*", header)
    if not m or (not m.group(1) and not m.group(2)):
        return None
    if m.group(1):
        start = int(m.group(1))
        end = int(m.group(2)) if m.group(2) else size - 1
    else:  # suffix range: the last N bytes
        n = int(m.group(2))
        if n == 0:
            return None
        start, end = max(0, size - n), size - 1
    end = min(end, size - 1)
    if start > end or start >= size:
        return None
    return start, end


def create_app(root: str | os.PathLike, token: str | None = None) -> _BearerAuth:
    """The Starlette app serving `root` (`root/owner/name/...`) read-only.

    `token`: when set, every request must carry `Authorization: Bearer <token>` (401 otherwise).
    """
    root = Path(root)
    if not root.is_dir():
        raise NotADirectoryError(f"mirror root {str(root)!r} is not a directory")
    mirror = _Mirror(root, token)

    def repo_or_404(owner: str, name: str) -> Path | Response:
        repo = mirror.repo_dir(owner, name)
        if repo is None:
            return _error(404, "RepositoryNotFound", f"Repository {owner}/{name} not found")
        return repo

    async def repo_and_revision(request: Request) -> tuple[Path, str] | Response:
        p = request.path_params
        repo = repo_or_404(p["owner"], p["name"])
        if isinstance(repo, Response):
            return repo
        commit = await run_in_threadpool(mirror.commit, repo)
        revision = p.get("revision", "main")
        if revision not in ("main", commit):
            return _error(404, "RevisionNotFound", f"Revision {revision!r} not found; this mirror has 'main' ({commit})")
        return repo, commit

    async def model_info(request: Request) -> Response:
        got = await repo_and_revision(request)
        if isinstance(got, Response):
            return got
        repo, commit = got
        p = request.path_params
        files = await run_in_threadpool(mirror.listing, repo)
        return JSONResponse(
            {
                "id": f"{p['owner']}/{p['name']}",
                "modelId": f"{p['owner']}/{p['name']}",
                "sha": commit,
                "private": False,
                "siblings": [{"rfilename": rel, "size": st.st_size} for rel, _, st in files],
            }
        )

    async def tree(request: Request) -> Response:
        got = await repo_and_revision(request)
        if isinstance(got, Response):
            return got
        repo, _ = got
        prefix = request.path_params.get("path", "").strip("/")
        recursive = request.query_params.get("recursive", "false").lower() in ("1", "true")
        files = await run_in_threadpool(mirror.listing, repo)
        entries, folders = [], set()
        for rel, real, st in files:
            if prefix and not rel.startswith(prefix + "/"):
                continue
            below = rel[len(prefix) + 1 :] if prefix else rel
            if "/" in below and not recursive:
                folders.add((prefix + "/" if prefix else "") + below.split("/", 1)[0])
                continue
            if recursive:
                parts = rel.split("/")[:-1]
                for i in range(len(prefix.split("/")) if prefix else 0, len(parts)):
                    folders.add("/".join(parts[: i + 1]))
            d = await run_in_threadpool(mirror.hasher.digest, real)
            entries.append(
                {
                    "type": "file",
                    "path": rel,
                    "size": st.st_size,
                    "oid": d.git_sha1,
                    "lfs": {"oid": d.sha256, "size": st.st_size, "pointerSize": 134},
                }
            )
        dirs = [{"type": "directory", "path": f, "oid": hashlib.sha1(f.encode()).hexdigest(), "size": 0} for f in sorted(folders)]
        return JSONResponse(dirs + entries)

    async def resolve(request: Request) -> Response:
        got = await repo_and_revision(request)
        if isinstance(got, Response):
            return got
        repo, commit = got
        relpath = request.path_params["file"]
        path = mirror.file_in(repo, relpath)
        if path is None:
            return _error(404, "EntryNotFound", f"Entry {relpath!r} not found in this repository")
        d = await run_in_threadpool(mirror.hasher.digest, path)
        size = path.stat().st_size
        headers = {
            "X-Repo-Commit": commit,
            "ETag": f'"{d.sha256}"',
            "X-Linked-Etag": f'"{d.sha256}"',
            "X-Linked-Size": str(size),
            "Accept-Ranges": "bytes",
            "Content-Type": "application/octet-stream",
        }
        start, end, status = 0, size - 1, 200
        if "range" in request.headers and size > 0:
            rng = _parse_range(request.headers["range"], size)
            if rng is None:
                headers["Content-Range"] = f"bytes */{size}"
                return Response(status_code=416, headers=headers)
            start, end = rng
            status = 206
            headers["Content-Range"] = f"bytes {start}-{end}/{size}"
        length = max(0, end - start + 1)
        headers["Content-Length"] = str(length)
        if request.method == "HEAD":
            return Response(status_code=status, headers=headers)
        return StreamingResponse(_iter_file(path, start, length), status_code=status, headers=headers)

    async def not_found(request: Request) -> Response:
        return _error(404, "EntryNotFound", "Not found")

    routes = [
        Route("/api/models/{owner}/{name}", model_info, methods=["GET"]),
        Route("/api/models/{owner}/{name}/revision/{revision}", model_info, methods=["GET"]),
        Route("/api/models/{owner}/{name}/tree/{revision}", tree, methods=["GET"]),
        Route("/api/models/{owner}/{name}/tree/{revision}/{path:path}", tree, methods=["GET"]),
        Route("/{owner}/{name}/resolve/{revision}/{file:path}", resolve, methods=["GET", "HEAD"]),
        Route("/{rest:path}", not_found, methods=["GET", "HEAD"]),
    ]
    return _BearerAuth(Starlette(routes=routes), mirror)


class _BearerAuth:
    """ASGI wrapper answering 401 before routing when a token is required and not given."""

    def __init__(self, app: Starlette, mirror: _Mirror) -> None:
        self.app = app
        self.mirror = mirror

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "http" and not self.mirror.authorized(Request(scope)):
            response = _error(401, "Unauthorized", "Invalid or missing bearer token for this mirror")
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)


def _app_from_env() -> _BearerAuth:
    """App factory for uvicorn's worker processes, which import the app by name."""
    return create_app(os.environ["NLP_HUB_SERVE_ROOT"], token=os.environ.get("NLP_HUB_SERVE_TOKEN") or None)


def serve(
    root: str | os.PathLike, host: str = "127.0.0.1", port: int = 8080, token: str | None = None, workers: int = 1
) -> None:
    """Run the mirror until interrupted. `workers` > 1 runs that many uvicorn processes (one
    event loop each, so a many-core mirror host is not limited to one core); each hashes a
    file once for itself."""
    import uvicorn

    create_app(root, token=token)  # fail early, in this process, on a bad root
    logger.info("serving %s on http://%s:%d%s", Path(root).resolve(), host, port, " (token required)" if token else "")
    if workers <= 1:
        uvicorn.run(create_app(root, token=token), host=host, port=port, log_level="warning")
        return
    os.environ["NLP_HUB_SERVE_ROOT"] = str(Path(root).resolve())
    if token:
        os.environ["NLP_HUB_SERVE_TOKEN"] = token
    uvicorn.run("nlp.hub.server:_app_from_env", factory=True, host=host, port=port, workers=workers, log_level="warning")
