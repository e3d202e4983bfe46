"""Fetch one file from a URL into the cache: resumable, verified, atomic, locked. The hub's one
HTTP layer: model files (url / modelscope sources, Hugging Face-protocol blobs), dataset files
and `file://` package data all come through `fetch_url`. The guarantees:

- resume: bytes land in `<blob>.incomplete`; a retry asks for `Range: bytes=<have>-` with
  `If-Range: <validator>` (the ETag or Last-Modified of the response that started the file, kept
  in `<blob>.incomplete.validator`) and appends when the server answers 206 starting at that byte.
  A 200 restarts from zero; a 416 means the partial file is stale (e.g. longer than the file now
  is): it is discarded and the download starts again. A partial file with neither a validator nor
  a digest to check the result against is not resumed (it may be part of another version);
- retries: connection errors, timeouts, 408, 429 and 5xx are retried with exponential backoff,
  honouring `Retry-After` up to a cap (`RetryPolicy`); other 4xx fail at once (the URL is wrong or
  the token is), so the caller can move to the next source;
- completeness: a file is complete when a header says how long it is (Content-Length, the total
  of Content-Range, a chunked body's terminator), when the caller knows its size or sha256, or
  when a second download gives the same bytes; a body that ends with none of these is read again,
  never taken on trust (a digest recorded from a cut-short body would reject the right file later).
  Two identical reads do not tell a server that cuts every body at the same byte from the file,
  so a file in a format that states its own extent is also checked against it before it becomes
  visible, whenever no digest vouches for it (`format_problem`: safetensors' header and data
  offsets, JSON parsed whole, zip's central directory, gzip / bz2 / xz end-of-stream markers);
- integrity: sha256 (and, when given, the git blob id) is checked before the file gets its final
  name. A mismatch, or a Git LFS pointer where the file should be, deletes the partial file and
  raises `IntegrityError` naming the file, the expected and the actual digest;
- atomicity: the verified file is renamed into place (`os.replace`), so readers never see half a file;
- concurrency: a `filelock` per destination serialises processes; the second one finds the file
  already there, checks it and returns.
"""

from __future__ import annotations

import bz2
import email.utils
import gzip
import hashlib
import json
import logging
import lzma
import struct
import zipfile
import os
import re
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlparse

import requests
from filelock import FileLock

from nlp._common import HubError, sha256_file

__all__ = [
    "DEFAULT_RETRY", "IntegrityError", "RetryPolicy", "copy_verified", "fetch_url", "format_problem", "lfs_pointer",
    "retry_after_seconds", "verify_file",
]

logger = logging.getLogger(__name__)

_CHUNK = 1 << 20
_RETRY_STATUS = {408, 425, 429}  # and every 5xx
_MAX_DIGITS = 19  # header numbers longer than this are not numbers any file has


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how long a URL is retried.

    `attempts`: tries in all. `backoff`: the first wait in seconds, doubled after each failure.
    `max_delay`: the longest single wait, `Retry-After` included (a server asking for an hour
    does not stall a download for an hour: after `attempts` the next source is tried).
    """

    attempts: int = 5
    backoff: float = 0.5
    max_delay: float = 30.0

    def delay(self, attempt: int, retry_after: float | None) -> float:
        """The wait before try number `attempt` (1-based; 0 waits nothing)."""
        if attempt <= 0:
            return 0.0
        wait = retry_after if retry_after is not None else self.backoff * (2 ** (attempt - 1))
        return max(0.0, min(wait, self.max_delay))


DEFAULT_RETRY = RetryPolicy()


class IntegrityError(HubError):
    """Downloaded bytes do not match the expected sha256 or size."""


class _Fatal(HubError):
    """A failure that retrying the same URL cannot fix (4xx)."""


class _Retry(HubError):
    """A failure worth another try: `retry_after` seconds when the server said so, `now` to skip the wait."""

    def __init__(self, message: str, retry_after: float | None = None, now: bool = False) -> None:
        super().__init__(message)
        self.retry_after = 0.0 if now else retry_after


def _git_blob_sha1(path: Path) -> str:
    h = hashlib.sha1(b"blob %d\0" % path.stat().st_size)
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def _md5(path: Path) -> str:
    h = hashlib.md5(usedforsecurity=False)
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


_LFS_PREFIX = b"version https://git-lfs.github.com/spec/"


def lfs_pointer(path: str | os.PathLike) -> tuple[str, int] | None:
    """(sha256, size) when `path` is a Git LFS pointer file instead of the content it points at.

    A mirror folder made with `git clone` but without `git lfs pull` holds these in place of the
    weights; served or copied as they are, they would be cached as the model.
    """
    try:
        if os.path.getsize(path) > 1024:
            return None
        with open(path, "rb") as f:
            text = f.read(1024)
    except OSError:
        return None
    if not text.startswith(_LFS_PREFIX):
        return None
    oid = re.search(rb"^oid sha256:([0-9a-f]{64})$", text, re.M)
    size = re.search(rb"^size (\d{1,19})$", text, re.M)
    return (oid.group(1).decode() if oid else "unknown", int(size.group(1)) if size else -1)


_STREAMS = {".gz": gzip.open, ".tgz": gzip.open, ".bz2": bz2.open, ".xz": lzma.open}


def format_problem(path: Path, name: str | None = None) -> str | None:
    """Why the file at `path` is not whole by its own format's account (None: whole, or a format
    that does not state its extent). `name` (default: the path's) decides the format by suffix."""
    suffix = Path(name or path.name).suffix.lower()
    size = path.stat().st_size
    try:
        if suffix == ".safetensors":
            with open(path, "rb") as f:
                head = f.read(8)
                if len(head) < 8:
                    return f"{size} bytes: shorter than a safetensors header"
                (n,) = struct.unpack("<Q", head)
                if n > size - 8:
                    return f"its safetensors header says {n} header bytes; the file has {size} in all"
                header = json.loads(f.read(n))
            ends = [t["data_offsets"][1] for k, t in header.items() if k != "__metadata__"]
            expected = 8 + n + max(ends, default=0)
            if expected != size:
                return f"its safetensors header describes {expected} bytes; the file has {size}"
        elif suffix == ".json":
            with open(path, encoding="utf-8") as f:
                json.load(f)
        elif suffix in (".zip", ".whl"):
            with zipfile.ZipFile(path) as z:  # reads the central directory at the end of the file
                last = max((i.header_offset + i.compress_size for i in z.infolist()), default=0)
            if last > size:
                return f"its zip directory places data up to byte {last}; the file has {size}"
        elif suffix in _STREAMS:
            with _STREAMS[suffix](path, "rb") as f:
                while f.read(_CHUNK):
                    pass
    except (ValueError, KeyError, TypeError, IndexError, EOFError, OSError, zipfile.BadZipFile, lzma.LZMAError,
            struct.error) as err:  # JSON, header fields, compressed streams that end early
        return f"not a whole {suffix[1:]} file ({type(err).__name__}: {str(err)[:120]})"
    return None


def _known(sha256: str | None) -> bool:
    return bool(sha256) and sha256 != "unknown"


def verify_file(
    path: Path, what: str, *, sha256: str | None, size: int | None, git_sha1: str | None = None, md5: str | None = None
) -> str:
    """Check a complete file; returns its sha256. IntegrityError (naming `what`, the expected and
    the actual digest) on a mismatch; the caller removes the file."""
    digest = sha256_file(path)
    pointer = lfs_pointer(path)
    if pointer is not None:
        raise IntegrityError(
            f"{what}: got a Git LFS pointer (oid sha256:{pointer[0]}, size {pointer[1]}) instead of the file "
            f"(expected sha256 {sha256 if _known(sha256) else pointer[0]}, actual sha256 {digest} of the "
            f"{path.stat().st_size}-byte pointer). The mirror was copied without its LFS objects: run "
            "`git lfs pull` in the mirror's repository folder."
        )
    actual_size = path.stat().st_size
    if size is not None and actual_size != size:
        raise IntegrityError(f"{what}: size mismatch: expected {size} bytes, got {actual_size} (sha256 {digest})")
    if _known(sha256) and digest != sha256:
        raise IntegrityError(f"{what}: sha256 mismatch: expected {sha256}, actual {digest}")
    if md5 and (actual := _md5(path)) != md5.lower():  # the only digest some publishers give (PaddleNLP datasets)
        raise IntegrityError(f"{what}: md5 mismatch: expected {md5}, actual {actual} (sha256 {digest})")
    if git_sha1 and (actual := _git_blob_sha1(path)) != git_sha1:
        raise IntegrityError(f"{what}: git blob id mismatch: expected {git_sha1}, actual {actual} (sha256 {digest})")
    return digest


def _progress(enabled: bool, total: int | None, initial: int, desc: str):
    from tqdm.auto import tqdm

    return tqdm(
        total=total, initial=initial, desc=desc, unit="B", unit_scale=True, unit_divisor=1024,
        disable=not enabled, leave=False,
    )


def _number(text: str | None) -> int | None:
    text = (text or "").strip()
    return int(text) if text.isdigit() and len(text) <= _MAX_DIGITS else None


def retry_after_seconds(value: str | None) -> float | None:
    """`Retry-After` as seconds from now: a number of seconds or an HTTP date; None if absent or unreadable."""
    if not value:
        return None
    seconds = _number(value)
    if seconds is not None:
        return float(seconds)
    try:
        when = email.utils.parsedate_to_datetime(value.strip())
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - time.time())


def _printable(value: str) -> bool:
    return all(" " <= c <= "~" for c in value) and len(value) < 1024


def _content_range(value: str | None) -> tuple[int | None, int | None]:
    """(first byte, total) of `Content-Range: bytes first-last/total`; None for what is absent or `*`."""
    m = re.fullmatch(r"\s*bytes\s+(\d+)-(\d+)/(\d+|\*)\s*", value or "")
    if not m:
        return None, None
    return _number(m.group(1)), _number(m.group(3))


def fetch_url(
    url: str,
    dest: Path,
    *,
    sha256: str | None = None,
    size: int | None = None,
    git_sha1: str | None = None,
    md5: str | None = None,
    lock_path: Path | None = None,
    incomplete_path: Path | None = None,
    headers: dict[str, str] | None = None,
    retry: RetryPolicy | None = None,
    timeout: float = 30.0,
    progress: bool = False,
    what: str | None = None,
) -> str:
    """Download `url` to `dest` (see the module docstring); returns the file's sha256.

    An existing `dest` is verified and kept. `what` names the file in errors (default: the URL).
    Raises HubError when the URL fails for good, and IntegrityError when the bytes are wrong.
    """
    if url.startswith("file://"):
        return copy_verified(Path(unquote(urlparse(url).path)), dest, sha256=sha256, size=size, md5=md5, lock_path=lock_path)
    what = what or url
    policy = retry or DEFAULT_RETRY
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    incomplete = incomplete_path or dest.with_name(dest.name + ".incomplete")
    incomplete.parent.mkdir(parents=True, exist_ok=True)
    lock_path = lock_path or dest.with_name(dest.name + ".lock")
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(lock_path)):
        if dest.exists():
            try:
                return verify_file(dest, f"{what} (cached at {dest})", sha256=sha256, size=size, git_sha1=git_sha1, md5=md5)
            except IntegrityError as err:  # damaged on disk since: fetch it again
                logger.warning("%s; removing it and downloading again", err)
                dest.unlink()
        last_error: Exception | None = None
        unconfirmed: str | None = None  # digest of a body whose length no header stated
        retry_after: float | None = None
        for attempt in range(policy.attempts):
            wait = policy.delay(attempt, retry_after)
            if wait:
                logger.info("retrying %s in %.1fs (attempt %d/%d): %s", url, wait, attempt + 1, policy.attempts, last_error)
                time.sleep(wait)
            retry_after = None
            try:
                digest, established = _get_once(
                    url, incomplete, size, headers or {}, timeout, progress, dest.name,
                    verifiable=_known(sha256) or bool(git_sha1 or md5),
                )
            except _Fatal:
                raise
            except _Retry as err:
                last_error, retry_after = err, err.retry_after
                continue
            except (requests.RequestException, OSError) as err:  # connection dropped, timeout
                last_error = err
                continue
            try:
                verify_file(incomplete, what, sha256=sha256, size=size, git_sha1=git_sha1, md5=md5)
            except IntegrityError:
                incomplete.unlink(missing_ok=True)  # nothing left that a later call would resume
                _validator_path(incomplete).unlink(missing_ok=True)
                raise
            if not (_known(sha256) or git_sha1 or md5) and (problem := format_problem(incomplete, dest.name)):
                # no digest vouches for it, and its own format says it is cut short (a server may
                # cut every body at the same byte: two reads would agree)
                incomplete.unlink(missing_ok=True)
                _validator_path(incomplete).unlink(missing_ok=True)
                last_error = HubError(f"{what} is cut short: {problem}; nothing was kept")
                logger.info("%s; downloading again", last_error)
                continue
            if not (established or size is not None or _known(sha256) or git_sha1 or md5) and unconfirmed != digest:
                # the body just ended: complete, or cut short? Only two reads that agree say so.
                incomplete.unlink(missing_ok=True)
                logger.info("%s: no length from the server; downloading again to confirm the file is complete", url)
                last_error = HubError(
                    f"the server sends no length and the downloads did not agree (sha256 {unconfirmed}, then {digest}): "
                    "the body is cut short or changing; nothing was kept"
                    if unconfirmed else "the server sends no length and the download could not be confirmed"
                )
                unconfirmed, retry_after = digest, (0.0 if unconfirmed is None else None)
                continue
            os.replace(incomplete, dest)
            _validator_path(incomplete).unlink(missing_ok=True)
            return digest
        raise HubError(f"{url}: failed after {policy.attempts} attempts: {last_error}")


def _validator_path(incomplete: Path) -> Path:
    return incomplete.with_name(incomplete.name + ".validator")


def _get_once(
    url: str, incomplete: Path, size: int | None, headers: dict, timeout: float, progress: bool, desc: str,
    verifiable: bool,
) -> tuple[str, bool]:
    """One GET, resuming from the partial file. Returns the sha256 of the result and whether a
    header established its full length (so that a short body raises instead of returning).

    A partial file is resumed with `If-Range: <the validator of the response that started it>`
    (ETag or Last-Modified), so a file changed on the server since restarts from zero instead of
    gluing two versions together. Without a validator a partial is resumed only when a digest will
    check the result (`verifiable`); otherwise it is discarded.
    """
    offset = incomplete.stat().st_size if incomplete.exists() else 0
    vpath = _validator_path(incomplete)
    validator = vpath.read_text(encoding="utf-8").strip() if offset and vpath.is_file() else None
    if (size is not None and offset > size) or (offset and not validator and not verifiable):
        incomplete.unlink()  # longer than the file, or a prefix nothing could vouch for
        offset = 0
    req_headers = dict(headers, **({"Range": f"bytes={offset}-"} if offset else {}))
    if offset and validator:
        req_headers["If-Range"] = validator
    req_headers.setdefault("Accept-Encoding", "identity")  # the byte count must be the file's
    with requests.get(url, headers=req_headers, stream=True, timeout=timeout, allow_redirects=True) as resp:
        code = resp.status_code
        if code == 416 and offset:
            # nothing after `offset`: the partial file is not a prefix of this file (it may be
            # longer than the file is now). Never "done": start again from zero.
            incomplete.unlink()
            raise _Retry(f"{url}: HTTP 416 for the {offset} bytes already here; the partial file was stale, restarting", now=True)
        if code in _RETRY_STATUS or code >= 500:
            raise _Retry(f"{url}: HTTP {code} {resp.reason}", retry_after=retry_after_seconds(resp.headers.get("Retry-After")))
        if 400 <= code < 500:
            raise _Fatal(f"{url}: HTTP {code} {resp.reason}")
        hasher = hashlib.sha256()
        total: int | None
        if code == 206 and offset:
            start, total = _content_range(resp.headers.get("Content-Range"))
            if start != offset:
                incomplete.unlink()
                raise _Retry(f"server resumed at byte {start}, asked for {offset}; restarting", now=True)
            if total is None and (length := _number(resp.headers.get("Content-Length"))) is not None:
                total = offset + length
            with open(incomplete, "rb") as f:  # the digest covers the bytes we already have
                while chunk := f.read(_CHUNK):
                    hasher.update(chunk)
            mode = "ab"
        elif code == 206:  # a range we did not ask for
            raise _Retry(f"{url}: HTTP 206 to a request without Range", now=True)
        else:
            offset, mode = 0, "wb"
            total = _number(resp.headers.get("Content-Length"))
            etag, modified = resp.headers.get("ETag", ""), resp.headers.get("Last-Modified", "")
            fresh = etag if etag and not etag.startswith("W/") else modified  # If-Range needs a strong one
            if fresh and _printable(fresh):
                vpath.write_text(fresh, encoding="utf-8")
            else:
                vpath.unlink(missing_ok=True)
        chunked = "chunked" in resp.headers.get("Transfer-Encoding", "").lower()  # its end is explicit
        with open(incomplete, mode) as f, _progress(progress, total if total is not None else size, offset, desc) as bar:
            # small reads: when the connection drops, only the last partial read is lost
            for chunk in resp.iter_content(64 * 1024):
                f.write(chunk)
                hasher.update(chunk)
                bar.update(len(chunk))
            f.flush()
            os.fsync(f.fileno())
        have = incomplete.stat().st_size
        if total is not None and have < total:
            raise requests.RequestException(f"connection closed at {have} of {total} bytes")
        if total is not None and have > total:
            incomplete.unlink()
            raise _Retry(f"{url}: got {have} bytes, the server announced {total}; restarting", now=True)
        return hasher.hexdigest(), total is not None or chunked


def copy_verified(
    src: Path, dest: Path, *, sha256: str | None, size: int | None, md5: str | None = None, lock_path: Path | None = None
) -> str:
    """Copy a local file into the cache with the same verification and atomic rename as a download."""
    if not src.is_file():
        raise HubError(f"file {str(src)!r} does not exist")
    dest.parent.mkdir(parents=True, exist_ok=True)
    lock_path = lock_path or dest.with_name(dest.name + ".lock")
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(lock_path)):
        if dest.exists():
            return verify_file(dest, f"{dest} (cached)", sha256=sha256, size=size, md5=md5)
        digest = verify_file(src, str(src), sha256=sha256, size=size, md5=md5)
        tmp = dest.with_name(f".{dest.name}.{os.getpid()}.tmp")
        try:
            shutil.copyfile(src, tmp)
            os.replace(tmp, dest)
        finally:
            tmp.unlink(missing_ok=True)
        return digest
