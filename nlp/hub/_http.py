"""Fetch one file from a plain URL into the cache: resumable, verified, atomic, locked.

Used for PaddleNLP's download URLs, ModelScope file URLs and `file://` package data; Hugging
Face-protocol repos go through huggingface_hub instead. The guarantees:

- resume: bytes land in `<blob>.incomplete`; a retry asks for `Range: bytes=<have>-` and appends
  when the server answers 206 (a 200 restarts from zero);
- retries: connection errors, timeouts and 5xx are retried with exponential backoff; 4xx fail at
  once (the URL is wrong or the token is), so the caller can move to the next source;
- integrity: sha256 is computed while streaming; a mismatch with the card (or the digest recorded
  by an earlier download) deletes the partial file and raises `IntegrityError`, so corrupted bytes
  never reach the final path;
- atomicity: the verified file is renamed into place (`os.replace`), so readers never see half a file;
- concurrency: a `filelock` per destination serialises processes; the second one finds the file
  already there, checks it and returns.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import time
from pathlib import Path
from urllib.parse import unquote, urlparse

import requests
from filelock import FileLock

from nlp._common import HubError

__all__ = ["IntegrityError", "copy_verified", "fetch_url", "sha256_file"]

logger = logging.getLogger(__name__)

_CHUNK = 1 << 20


class IntegrityError(HubError):
    """Downloaded bytes do not match the expected sha256 or size."""


class _Fatal(HubError):
    """A failure that retrying the same URL cannot fix (4xx)."""


def sha256_file(path: str | os.PathLike) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def _check(path: Path, sha256: str | None, size: int | None, what: str) -> str:
    """Verify a complete file; returns its sha256. Raises IntegrityError on mismatch."""
    actual_size = path.stat().st_size
    if size is not None and actual_size != size:
        raise IntegrityError(f"{what}: size {actual_size} bytes, expected {size}")
    digest = sha256_file(path)
    if sha256 and sha256 != "unknown" and digest != sha256:
        raise IntegrityError(f"{what}: sha256 {digest}, expected {sha256}")
    return digest


def _progress(enabled: bool, total: int | None, initial: int, desc: str):
    from tqdm.auto import tqdm

    return tqdm(
        total=total, initial=initial, desc=desc, unit="B", unit_scale=True, unit_divisor=1024,
        disable=not enabled, leave=False,
    )


def fetch_url(
    url: str,
    dest: Path,
    *,
    sha256: str | None = None,
    size: int | None = None,
    lock_path: Path | None = None,
    incomplete_path: Path | None = None,
    headers: dict[str, str] | None = None,
    retries: int = 4,
    backoff: float = 0.5,
    timeout: float = 30.0,
    progress: bool = False,
) -> str:
    """Download `url` to `dest` (see the module docstring); returns the file's sha256.

    An existing `dest` is verified and kept. Raises HubError when the URL fails for good, and
    IntegrityError when the bytes are wrong.
    """
    if url.startswith("file://"):
        return copy_verified(Path(unquote(urlparse(url).path)), dest, sha256=sha256, size=size, lock_path=lock_path)
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    incomplete = incomplete_path or dest.with_name(dest.name + ".incomplete")
    incomplete.parent.mkdir(parents=True, exist_ok=True)
    lock_path = lock_path or dest.with_name(dest.name + ".lock")
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(lock_path)):
        if dest.exists():
            return _check(dest, sha256, size, f"{dest} (cached)")
        last_error: Exception | None = None
        for attempt in range(retries + 1):
            if attempt:
                delay = backoff * (2 ** (attempt - 1))
                logger.info("retrying %s in %.1fs (attempt %d/%d): %s", url, delay, attempt + 1, retries + 1, last_error)
                time.sleep(delay)
            try:
                digest = _get_once(url, incomplete, size, headers or {}, timeout, progress, dest.name)
            except _Fatal:
                raise
            except (requests.RequestException, OSError) as err:  # connection dropped, timeout, 5xx
                last_error = err
                continue
            if size is not None and incomplete.stat().st_size != size:
                got = incomplete.stat().st_size
                incomplete.unlink(missing_ok=True)
                raise IntegrityError(f"{url}: got {got} bytes, expected {size}; partial download removed")
            if sha256 and sha256 != "unknown" and digest != sha256:
                incomplete.unlink(missing_ok=True)
                raise IntegrityError(f"{url}: sha256 {digest}, expected {sha256}; corrupted download removed")
            os.replace(incomplete, dest)
            return digest
        raise HubError(f"{url}: failed after {retries + 1} attempts: {last_error}")


def _get_once(url: str, incomplete: Path, size: int | None, headers: dict, timeout: float, progress: bool, desc: str) -> str:
    """One GET, resuming from the partial file; returns the sha256 of the (possibly partial) result."""
    offset = incomplete.stat().st_size if incomplete.exists() else 0
    if size is not None and offset > size:
        incomplete.unlink()
        offset = 0
    req_headers = dict(headers, **({"Range": f"bytes={offset}-"} if offset else {}))
    req_headers.setdefault("Accept-Encoding", "identity")  # the byte count must be the file's
    with requests.get(url, headers=req_headers, stream=True, timeout=timeout, allow_redirects=True) as resp:
        if resp.status_code == 416 and offset:
            # nothing after `offset`: either complete already, or a stale partial of another file
            if size is None or offset == size:
                return sha256_file(incomplete)
            incomplete.unlink()
            raise requests.RequestException(f"416 for a partial file of {offset} bytes; restarting")
        if 400 <= resp.status_code < 500:
            raise _Fatal(f"{url}: HTTP {resp.status_code} {resp.reason}")
        if resp.status_code >= 500:
            raise requests.RequestException(f"{url}: HTTP {resp.status_code} {resp.reason}")
        hasher = hashlib.sha256()
        if resp.status_code == 206 and offset:
            start = resp.headers.get("Content-Range", "").removeprefix("bytes ").split("-", 1)[0]
            if start != str(offset):
                incomplete.unlink()
                raise requests.RequestException(f"server resumed at {start!r}, asked {offset}; restarting")
            with open(incomplete, "rb") as f:  # the digest covers the bytes we already have
                while chunk := f.read(_CHUNK):
                    hasher.update(chunk)
            mode = "ab"
        else:
            offset, mode = 0, "wb"
        length = resp.headers.get("Content-Length")
        total = offset + int(length) if length and length.isdigit() else size
        with open(incomplete, mode) as f, _progress(progress, total, offset, desc) as bar:
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
        return hasher.hexdigest()


def copy_verified(src: Path, dest: Path, *, sha256: str | None, size: int | None, lock_path: Path | None = None) -> str:
    """Copy a local file into the cache with the same verification and atomic rename as a download."""
    if not src.is_file():
        raise HubError(f"file {str(src)!r} does not exist")
    dest.parent.mkdir(parents=True, exist_ok=True)
    lock_path = lock_path or dest.with_name(dest.name + ".lock")
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(lock_path)):
        if dest.exists():
            return _check(dest, sha256, size, f"{dest} (cached)")
        digest = _check(src, sha256, size, str(src))
        tmp = dest.with_name(f".{dest.name}.{os.getpid()}.tmp")
        try:
            shutil.copyfile(src, tmp)
            os.replace(tmp, dest)
        finally:
            tmp.unlink(missing_ok=True)
        return digest
