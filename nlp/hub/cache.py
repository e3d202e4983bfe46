"""Inspect and prune the cache (`nlp hub cache ls` / `rm`). Layout: docs/hub.md.

    <cache>/models--owner--name/       Hugging Face layout (blobs/, refs/, snapshots/<commit>/)
    <cache>/files--<name>/             url / modelscope / builtin sources (snapshots/<kind>-<rev>/, blobs/)
    <cache>/converted--<name>/<tag>/   transformers folders converted from Paddle sources
    <cache>/records/<name>.json        sha256 recorded on first download of "unknown" files
    <cache>/.locks/                    file locks
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from ._env import hub_cache_dir

__all__ = ["CacheEntry", "remove_from_cache", "scan_cache"]

_PREFIXES = {"models--": "hf", "files--": "files", "converted--": "converted"}


@dataclass(frozen=True)
class CacheEntry:
    name: str  # "owner/repo" for hf entries, the card name otherwise
    kind: str  # "hf" | "files" | "converted"
    path: Path
    size: int  # bytes on disk (blobs counted once)
    snapshots: tuple[str, ...]


def _du(path: Path) -> int:
    total = 0
    for dirpath, _, filenames in os.walk(path):
        for fn in filenames:
            p = os.path.join(dirpath, fn)
            if not os.path.islink(p):
                try:
                    total += os.stat(p).st_size
                except OSError:
                    pass
    return total


def scan_cache(cache_dir: str | os.PathLike | None = None) -> list[CacheEntry]:
    root = hub_cache_dir(cache_dir)
    if not root.is_dir():
        return []
    out = []
    for child in sorted(root.iterdir()):
        for prefix, kind in _PREFIXES.items():
            if child.name.startswith(prefix) and child.is_dir():
                name = child.name[len(prefix):].replace("--", "/")
                snaps_dir = child / "snapshots" if kind != "converted" else child
                snaps = tuple(sorted(p.name for p in snaps_dir.iterdir() if p.is_dir() and not p.name.startswith("."))) if snaps_dir.is_dir() else ()
                out.append(CacheEntry(name, kind, child, _du(child), snaps))
    return out


def remove_from_cache(name: str, cache_dir: str | os.PathLike | None = None) -> list[Path]:
    """Delete every cache entry of `name` (a card name or 'owner/repo'); returns what was removed."""
    root = hub_cache_dir(cache_dir)
    removed = []
    for entry in scan_cache(root):
        if entry.name == name:
            shutil.rmtree(entry.path)
            removed.append(entry.path)
    rec = root / "records" / (name.replace("/", "--") + ".json")
    if rec.exists():
        rec.unlink()
        removed.append(rec)
    return removed
