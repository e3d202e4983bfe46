"""One file by URL into the cache, under the rules of model files: `fetch_file`.

Used for files that belong to no model card, such as the public datasets' archives: the same
HTTP layer (resume, retries with `Retry-After`, locks, completeness, atomic rename), the same
cache (`<cache>/files--<name>/snapshots/url-main/<file>`, listed and removed by `nlp hub cache`),
the same integrity rules (a published sha256 or md5 is checked; otherwise the sha256 of the first
complete download is recorded in `<cache>/records/<name>.json` and later downloads must match
it) and the same offline switches (`NLP_OFFLINE`, `HF_HUB_OFFLINE`; `HF_DATASETS_OFFLINE` too for
dataset files). `fetch_recorded` is the step shared with the url / modelscope sources of cards.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path, PurePosixPath
from urllib.parse import unquote, urlparse

from nlp._common import HubError

from . import records
from ._env import hub_cache_dir, is_offline, offline_reason
from ._http import RetryPolicy, fetch_url

__all__ = ["fetch_file", "fetch_recorded", "files_root"]


def files_root(cache: Path, name: str) -> Path:
    """`<cache>/files--<name>`: the folder of a name's plain files."""
    return cache / f"files--{name.replace('/', '--')}"


def fetch_recorded(
    cache: Path, name: str, label: str, filename: str, url: str, *, sha256: str | None = None,
    size: int | None = None, md5: str | None = None, progress: bool = False, retry: RetryPolicy | None = None,
    what: str | None = None,
) -> tuple[Path, str | None]:
    """Fetch `url` as `files--<name>/snapshots/<label>/<filename>`. Returns the path and, for a file
    whose sha256 was neither given nor recorded, the digest to record (None otherwise): the caller
    records a source's new digests together, after all its files arrived."""
    root = files_root(cache, name)
    known = sha256 if sha256 and sha256 != "unknown" else records.recorded(cache, name).get(label, {}).get(filename)
    flat = filename.replace("/", "--")
    dest = root / "snapshots" / label / filename
    digest = fetch_url(
        url, dest, sha256=known, size=size, md5=md5, progress=progress, retry=retry, what=what,
        lock_path=cache / ".locks" / root.name / label / f"{flat}.lock",
        incomplete_path=root / "blobs" / label / f"{flat}.incomplete",
    )
    # fetch_url returns only files whose completeness it established (a length, a digest, or two
    # identical downloads), so a digest recorded from it is the whole file's
    return dest, (digest if known is None else None)


def _filename(url: str, filename: str | None) -> str:
    name = filename or unquote(PurePosixPath(urlparse(url).path).name)
    parts = name.split("/")
    if not name or name.startswith("/") or "\\" in name or any(p in ("", ".", "..") for p in parts):
        raise HubError(f"cannot store {url!r} as {name!r}: give a relative file name (filename=...)")
    return name


def fetch_file(
    url: str,
    *,
    name: str,
    filename: str | None = None,
    sha256: str | None = None,
    md5: str | None = None,
    size: int | None = None,
    cache_dir: str | os.PathLike | None = None,
    local_files_only: bool = False,
    dataset: bool = False,
    progress: bool | None = None,
    retry: RetryPolicy | None = None,
) -> Path:
    """The local path of `url`, downloaded into the cache under `name` unless already there.

    `name`: the cache entry (e.g. "dataset-tnews"); `filename`: the file's name in it (default: the
    URL's last path segment). `sha256` / `md5` / `size`: published facts, checked before the file
    is visible. Offline (`local_files_only`, NLP_OFFLINE, HF_HUB_OFFLINE, and for `dataset=True`
    HF_DATASETS_OFFLINE) a cached file is returned and a missing one raises HubError.
    """
    cache = hub_cache_dir(cache_dir)
    filename = _filename(url, filename)
    label = "url-main"
    dest = files_root(cache, name) / "snapshots" / label / filename
    if local_files_only or is_offline(datasets=dataset):
        if dest.is_file():
            return dest
        raise HubError(
            f"{filename} ({url}) is not in the cache {cache} and the network is off ({offline_reason()}). "
            f"Fetch it on a connected machine and carry the cache folder over (NLP_HUB_CACHE), or turn the "
            "network back on."
        )
    if progress is None:
        progress = sys.stderr.isatty()
    path, new = fetch_recorded(cache, name, label, filename, url, sha256=sha256, size=size, md5=md5,
                               progress=progress, retry=retry, what=f"{filename} of {name} ({url})")
    if new:
        records.record(cache, name, label, {filename: new})
    return path
