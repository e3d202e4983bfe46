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
absolute paths and symlinks whose target leaves DIR or is hidden (`.git/`, `.env`) all answer 404.

Hostile input gets a 4xx, never a 5xx: error headers are printable ASCII whatever the path's
script, tokens are compared as bytes in constant time, `Range` numbers are never parsed beyond 19
digits, and several or malformed ranges get the whole file (RFC 9110). A client must deliver its
request head within `header_timeout` seconds (`server_options`), so slow clients cannot pin the
server's connections.
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

from nlp._extras import MissingExtraError

try:
    from starlette.applications import Starlette
    from starlette.concurrency import run_in_threadpool
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response, StreamingResponse
    from starlette.routing import Route
    from uvicorn.protocols.http.h11_impl import H11Protocol
except ImportError as err:  # the serve extra
    raise MissingExtraError(err.name or "starlette", "the hub mirror (`nlp hub serve`)", extra="serve") from err

from nlp._common import ConfigError

__all__ = ["FileHasher", "check_port", "create_app", "parse_range", "serve", "server_options"]

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


def _header_safe(text: str) -> str:
    """`text` as printable ASCII: an HTTP header holds Latin-1 at most and no control characters,
    while the message may quote a path or revision in any script (`\\u4f60` for 你)."""
    return "".join(c if " " <= c <= "~" else c.encode("unicode_escape").decode("ascii") for c in text)


def _error(status: int, code: str, message: str) -> Response:
    return JSONResponse(
        {"error": message}, status_code=status, headers={"X-Error-Code": code, "X-Error-Message": _header_safe(message)}
    )


def _check_token(token: str | None) -> bytes | None:
    """The token as bytes; refused unless printable ASCII, the only thing HTTP clients put in a header."""
    if not token:
        return None
    bad = next((i for i, c in enumerate(token) if not " " < c <= "~"), None)
    if bad is not None:
        raise ConfigError(
            f"the mirror token must be printable ASCII without spaces (HTTP clients such as huggingface_hub "
            f"send it in the Authorization header); character {bad + 1} is {token[bad]!r}. Choose another "
            "token, e.g. `python -c \"import secrets; print(secrets.token_urlsafe(32))\"`."
        )
    return token.encode("ascii")


class _Mirror:
    """Maps URL paths to files under one root, refusing anything that would leave it or is hidden."""

    def __init__(self, root: Path, token: str | None) -> None:
        self.root = root.resolve()
        self.token = _check_token(token)
        self.hasher = FileHasher()

    # -- path safety -------------------------------------------------------------------------
    def _inside(self, path: Path) -> Path | None:
        """The real path if, after following every symlink, it stays under the root and no part of
        it below the root is hidden (a link may not expose `.git/` or `.secret` of the root)."""
        try:
            real = path.resolve(strict=True)
        except (OSError, RuntimeError, ValueError):
            return None
        if real == self.root:
            return real
        try:
            below = real.relative_to(self.root)
        except ValueError:
            return None
        if any(part.startswith(".") for part in below.parts):
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
    def authorized(self, scope: dict) -> bool:
        """Constant-time comparison of raw header bytes: a header in any encoding is just unequal."""
        if self.token is None:
            return True
        header = next((v for k, v in scope.get("headers", ()) if k.lower() == b"authorization"), b"")
        scheme, _, given = header.partition(b" ")
        return scheme.lower() == b"bearer" and hmac.compare_digest(given.strip(), self.token)


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


_RANGE = re.compile(r"\s*bytes\s*=\s*(\d*)\s*-\s*(\d*)\s*")
_MAX_DIGITS = 19  # more than any file size; longer numbers are "beyond the end", never parsed


def _number(digits: str) -> int:
    return int(digits) if len(digits) <= _MAX_DIGITS else 1 << 64


def parse_range(header: str, size: int) -> tuple[int, int] | None | bool:
    """What a `Range` header asks of a file of `size` bytes (RFC 9110 §14.2).

    (start, end inclusive) for one satisfiable byte range; False when it is unsatisfiable (416);
    None when the header is to be ignored and the whole file sent (200): empty, not `bytes=`,
    malformed, or several ranges (which a server may answer with the whole representation).
    """
    m = _RANGE.fullmatch(header)
    if not m or (not m.group(1) and not m.group(2)):
        return None
    if m.group(1):
        start = _number(m.group(1))
        end = _number(m.group(2)) if m.group(2) else size - 1
        if m.group(2) and end < start:
            return None  # invalid, not unsatisfiable: ignore it
    else:  # suffix range: the last N bytes
        n = _number(m.group(2))
        if n == 0:
            return False
        start, end = max(0, size - n), size - 1
    if start >= size:
        return False
    return start, min(end, size - 1)


class _Handlers:
    """The endpoints of the mirror, one method each; `routes()` maps URLs to them."""

    def __init__(self, mirror: _Mirror) -> None:
        self.mirror = mirror

    def routes(self) -> list[Route]:
        return [
            Route("/api/models/{owner}/{name}", self.model_info, methods=["GET"]),
            Route("/api/models/{owner}/{name}/revision/{revision}", self.model_info, methods=["GET"]),
            Route("/api/models/{owner}/{name}/tree/{revision}", self.tree, methods=["GET"]),
            Route("/api/models/{owner}/{name}/tree/{revision}/{path:path}", self.tree, methods=["GET"]),
            Route("/{owner}/{name}/resolve/{revision}/{file:path}", self.resolve, methods=["GET", "HEAD"]),
            Route("/{rest:path}", self.not_found, methods=["GET", "HEAD"]),
        ]

    async def _repo_and_commit(self, request: Request) -> tuple[Path, str] | Response:
        p = request.path_params
        repo = self.mirror.repo_dir(p["owner"], p["name"])
        if repo is None:
            return _error(404, "RepositoryNotFound", f"Repository {p['owner']}/{p['name']} not found")
        commit = await run_in_threadpool(self.mirror.commit, repo)
        revision = p.get("revision", "main")
        if revision not in ("main", commit):
            return _error(404, "RevisionNotFound", f"Revision {revision!r} not found; this mirror has 'main' ({commit})")
        return repo, commit

    async def model_info(self, request: Request) -> Response:
        got = await self._repo_and_commit(request)
        if isinstance(got, Response):
            return got
        repo, commit = got
        repo_id = f"{request.path_params['owner']}/{request.path_params['name']}"
        files = await run_in_threadpool(self.mirror.listing, repo)
        return JSONResponse(
            {
                "id": repo_id,
                "modelId": repo_id,
                "sha": commit,
                "private": False,
                "siblings": [{"rfilename": rel, "size": st.st_size} for rel, _, st in files],
            }
        )

    async def tree(self, request: Request) -> Response:
        got = await self._repo_and_commit(request)
        if isinstance(got, Response):
            return got
        repo, _ = got
        prefix = request.path_params.get("path", "").strip("/")
        recursive = request.query_params.get("recursive", "false").lower() in ("1", "true")
        files = await run_in_threadpool(self.mirror.listing, repo)
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
            d = await run_in_threadpool(self.mirror.hasher.digest, real)
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

    async def resolve(self, request: Request) -> Response:
        got = await self._repo_and_commit(request)
        if isinstance(got, Response):
            return got
        repo, commit = got
        relpath = request.path_params["file"]
        path = self.mirror.file_in(repo, relpath)
        if path is None:
            return _error(404, "EntryNotFound", f"Entry {relpath!r} not found in this repository")
        d = await run_in_threadpool(self.mirror.hasher.digest, path)
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
        rng = parse_range(request.headers["range"], size) if "range" in request.headers and size > 0 else None
        if rng is False:
            headers["Content-Range"] = f"bytes */{size}"
            return Response(status_code=416, headers=headers)
        if rng:
            start, end = rng
            status = 206
            headers["Content-Range"] = f"bytes {start}-{end}/{size}"
        length = max(0, end - start + 1)
        headers["Content-Length"] = str(length)
        if request.method == "HEAD":
            return Response(status_code=status, headers=headers)
        return StreamingResponse(_iter_file(path, start, length), status_code=status, headers=headers)

    async def not_found(self, request: Request) -> Response:
        return _error(404, "EntryNotFound", "Not found")


class _BearerAuth:
    """ASGI wrapper answering 401 before routing when a token is required and not given."""

    def __init__(self, app: Starlette, mirror: _Mirror) -> None:
        self.app = app
        self.mirror = mirror

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "http" and not self.mirror.authorized(scope):
            response = _error(401, "Unauthorized", "Invalid or missing bearer token for this mirror")
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)


def create_app(root: str | os.PathLike, token: str | None = None) -> _BearerAuth:
    """The Starlette app serving `root` (`root/owner/name/...`) read-only.

    `token`: when set (printable ASCII), every request must carry `Authorization: Bearer <token>`
    (401 otherwise).
    """
    root = Path(root)
    if not root.is_dir():
        raise NotADirectoryError(f"mirror root {str(root)!r} is not a directory")
    mirror = _Mirror(root, token)
    return _BearerAuth(Starlette(routes=_Handlers(mirror).routes()), mirror)


class _HeadDeadline:
    """A deadline for a request's head, mixed into uvicorn's HTTP protocols.

    uvicorn times out idle keep-alive connections but not a client that opens a connection and
    sends its request line a byte at a time (each byte cancels the keep-alive timer, and nothing
    else is armed): enough of those exhaust the server's sockets. Here a connection is closed when
    `header_timeout` seconds after it opened (or after its last response) no request is being
    served: its head never arrived. A response that takes longer is never cut.
    """

    header_timeout: float = 10.0

    def connection_made(self, transport) -> None:
        super().connection_made(transport)
        self._head_timer = None
        self._arm_head_timer()

    def _arm_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
        self._head_timer = self.loop.call_later(self.header_timeout, self._head_timed_out)

    def _serving(self) -> bool:
        cycle = self.cycle
        return (cycle is not None and not cycle.response_complete) or bool(getattr(self, "pipeline", None))

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if self._serving() or self.transport.is_closing():
            return  # re-armed when that response completes
        logger.info("closing a connection from %s: no complete request head in %.0fs", self.client, self.header_timeout)
        self.transport.close()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._arm_head_timer()  # the next request on this connection gets the same deadline

    def connection_lost(self, exc) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None
        super().connection_lost(exc)


class _H11HeadDeadline(_HeadDeadline, H11Protocol):
    """uvicorn's h11 protocol with the head deadline."""


try:  # uvicorn[standard]'s faster parser, when installed
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
except ImportError:  # pragma: no cover - httptools is part of uvicorn[standard]
    _PROTOCOL: type = _H11HeadDeadline
else:

    class _HttpToolsHeadDeadline(_HeadDeadline, HttpToolsProtocol):
        """uvicorn's httptools protocol with the head deadline."""

    _PROTOCOL = _HttpToolsHeadDeadline


def _protocol_class(header_timeout: float, parser: str) -> type:
    if parser not in ("auto", "h11"):
        raise ConfigError(f"parser {parser!r} is not 'auto' (httptools when installed) or 'h11'")
    base = _H11HeadDeadline if parser == "h11" else _PROTOCOL
    if header_timeout == _HeadDeadline.header_timeout:
        return base  # importable by name, so uvicorn's worker processes can use it
    return type(base.__name__, (base,), {"header_timeout": header_timeout})


def check_port(port: int) -> int:
    """`port` if it is a TCP port (0-65535, 0 = any free one); ConfigError otherwise."""
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
        raise ConfigError(f"port {port!r} is not a TCP port: give a number from 1 to 65535 (0 picks a free one)")
    return port


def server_options(*, header_timeout: float = 10.0, keep_alive: float = 5.0, parser: str = "auto") -> dict:
    """uvicorn settings of the mirror: an HTTP protocol with a request-head deadline, a keep-alive timeout.

    `uvicorn.run(app, host=..., port=..., **server_options())`; tests pass short timeouts.
    `parser`: "auto" (httptools when installed, else h11) or "h11".
    """
    return {"http": _protocol_class(header_timeout, parser), "timeout_keep_alive": keep_alive}


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

    check_port(port)
    app = create_app(root, token=token)  # fail early, in this process, on a bad root or token
    logger.info("serving %s on http://%s:%d%s", Path(root).resolve(), host, port, " (token required)" if token else "")
    if workers <= 1:
        uvicorn.run(app, host=host, port=port, log_level="warning", **server_options())
        return
    os.environ["NLP_HUB_SERVE_ROOT"] = str(Path(root).resolve())
    if token:
        os.environ["NLP_HUB_SERVE_TOKEN"] = token
    uvicorn.run(
        "nlp.hub.server:_app_from_env", factory=True, host=host, port=port, workers=workers, log_level="warning",
        **server_options(),
    )
