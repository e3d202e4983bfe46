"""Fetch a public dataset's files into ``$NLP_HOME/datasets/downloads`` with md5 checks.

Offline (``NLP_OFFLINE``/``HF_DATASETS_OFFLINE``/``HF_HUB_OFFLINE`` = 1, or
``local_files_only=True``) nothing is fetched: the error names the URL and how to pass a
local copy with ``data_files=``.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tarfile
import zipfile
from pathlib import Path

from filelock import FileLock

from nlp._common import DataError, atomic_write
from nlp.tasks.datasets._cache import nlp_home
from nlp.tasks.datasets.public import PublicDataset

__all__ = ["is_offline", "md5_of", "fetch_split"]


def is_offline() -> bool:
    return any(os.environ.get(v, "").lower() in ("1", "true", "yes", "on")
               for v in ("NLP_OFFLINE", "HF_DATASETS_OFFLINE", "HF_HUB_OFFLINE"))


def md5_of(path: Path) -> str:
    h = hashlib.md5()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _offline_error(spec: PublicDataset, split: str, url: str, why: str) -> DataError:
    inner = spec.splits[split][0]
    return DataError(
        f"{spec.name} ({split}) needs {url} ({why}). Download it where the network allows"
        + (f", unpack {inner}" if spec.url else "")
        + f", then pass the local file: nlp.tasks.datasets.load({spec.name!r}, "
        f"data_files={{{split!r}: 'path/to/{Path(inner).name}'}})"
        + (f". Also on the Hugging Face hub as {spec.hf_name!r}"
           + (f" (config {spec.hf_config!r})" if spec.hf_config else "") if spec.hf_name else ""))


def _get(url: str, dest: Path, md5: str | None) -> None:
    import requests  # only on this path: tests and offline use never import it

    with requests.get(url, stream=True, timeout=60) as r:
        r.raise_for_status()
        with atomic_write(dest, "wb") as f:
            for chunk in r.iter_content(1 << 20):
                f.write(chunk)
    if md5 and md5_of(dest) != md5:
        dest.unlink()
        raise DataError(f"{url}: md5 mismatch (expected {md5}); the download was removed, retry")


def _extract(archive: Path, root: Path) -> None:
    root = root.resolve()
    if zipfile.is_zipfile(archive):
        with zipfile.ZipFile(archive) as z:
            for member in z.namelist():
                if not (root / member).resolve().is_relative_to(root):
                    raise DataError(f"{archive}: member {member!r} escapes the target folder")
            z.extractall(root)
    else:
        with tarfile.open(archive) as t:
            t.extractall(root, filter="data")


def fetch_split(spec: PublicDataset, split: str, local_files_only: bool = False) -> Path:
    """Local path of `split`'s file, downloading (and checking md5) when needed and allowed."""
    inner, md5 = spec.splits[split]
    root = nlp_home() / "datasets" / "downloads" / spec.name
    path = root / inner
    if path.is_file() and (md5 is None or md5_of(path) == md5):
        return path
    url = spec.url or spec.split_urls[split]
    if local_files_only or is_offline():
        raise _offline_error(spec, split, url, "offline mode")
    root.mkdir(parents=True, exist_ok=True)
    try:
        with FileLock(str(root) + ".lock"):
            if spec.url:
                archive = root / Path(spec.url).name
                if not archive.is_file() or (spec.md5 and md5_of(archive) != spec.md5):
                    _get(spec.url, archive, spec.md5)
                _extract(archive, root)
            else:
                _get(url, path, md5)
    except OSError as err:  # requests' errors are OSErrors: no route, DNS, timeouts
        raise _offline_error(spec, split, url, f"download failed: {err}") from err
    if not path.is_file():
        raise DataError(f"{spec.name}: {inner} not found after unpacking {url}")
    if md5 and md5_of(path) != md5:
        shutil.move(str(path), str(path) + ".bad")
        raise DataError(f"{path}: md5 mismatch (expected {md5}); moved aside, retry the load")
    return path
