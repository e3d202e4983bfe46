"""A public dataset's published files, fetched through the hub's downloader and unpacked once.

The tasks layer does not import the hub, so the downloader is passed in: `fetch` is
`nlp.hub.fetch_file` (`nlp.auto.load_dataset`, `nlp data download` and `nlp finetune` pass it).
It brings the hub's rules for files: the hub cache, resume, retries, locks, the published md5
checked and a sha256 recorded on first download, and the offline switches (`NLP_OFFLINE`,
`HF_HUB_OFFLINE`, `HF_DATASETS_OFFLINE`). Without a `fetch`, only `data_files=` can supply a
public dataset, and the error says so.
"""

from __future__ import annotations

import tarfile
import zipfile
from collections.abc import Callable
from pathlib import Path

from filelock import FileLock

from nlp._common import DataError, atomic_directory
from nlp.tasks.datasets.public import PublicDataset

__all__ = ["FileFetcher", "fetch_split"]

# fetch(url, *, name, filename, md5, local_files_only, dataset) -> local path; nlp.hub.fetch_file
FileFetcher = Callable[..., Path]


def _where_else(spec: PublicDataset, split: str) -> str:
    inner = spec.splits[split][0]
    return (
        f"pass a local copy of the file: nlp.tasks.datasets.load({spec.name!r}, "
        f"data_files={{{split!r}: 'path/to/{Path(inner).name}'}})"
        + (f" (unpack {inner} from {spec.url})" if spec.url else "")
        + (f". Also on the Hugging Face hub as {spec.hf_name!r}"
           + (f" (config {spec.hf_config!r})" if spec.hf_config else "") if spec.hf_name else "")
    )


def _extract(archive: Path, target: Path) -> None:
    """Unpack `archive` into `target` through a temp folder renamed into place (no half-unpacked tree)."""
    with atomic_directory(target) as tmp:
        root = tmp.resolve()
        if zipfile.is_zipfile(archive):
            with zipfile.ZipFile(archive) as z:
                for member in z.namelist():
                    if not (root / member).resolve().is_relative_to(root):
                        raise DataError(f"{archive}: member {member!r} escapes the target folder")
                z.extractall(root)
        else:
            try:
                with tarfile.open(archive) as t:
                    t.extractall(root, filter="data")
            except tarfile.TarError as err:
                raise DataError(f"{archive} is neither a zip nor a tar archive ({err})") from err


def fetch_split(spec: PublicDataset, split: str, *, fetch: FileFetcher | None, local_files_only: bool = False) -> Path:
    """Local path of `split`'s published file, fetched (and unpacked) when needed."""
    inner, md5 = spec.splits[split]
    url = spec.url or spec.split_urls[split]
    if fetch is None:
        raise DataError(
            f"{spec.name} ({split}) is published at {url}; downloading goes through the hub: use "
            f"nlp.auto.load_dataset({spec.name!r}) or `nlp data download {spec.name}`, or {_where_else(spec, split)}"
        )
    name = f"dataset-{spec.name}"
    try:
        if not spec.url:  # one file per split
            return fetch(url, name=name, filename=Path(inner).name, md5=md5, local_files_only=local_files_only, dataset=True)
        archive = fetch(spec.url, name=name, md5=spec.md5, local_files_only=local_files_only, dataset=True)
    except OSError as err:  # the hub's HubError: offline and not cached, every retry failed, bad bytes
        raise DataError(f"{spec.name} ({split}): {err}. Or {_where_else(spec, split)}") from err
    unpacked = archive.with_name(archive.name + ".unpacked")
    path = unpacked / inner
    if not path.is_file():
        with FileLock(str(archive) + ".unpack.lock"):
            if not path.is_file():
                _extract(archive, unpacked)
    if not path.is_file():
        raise DataError(f"{spec.name}: {inner} not found in {spec.url} (unpacked at {unpacked})")
    return path
