"""Trust-on-first-use digests for files whose card says `sha256: unknown`.

The first verified download records its sha256 in `<cache>/records/<name>.json`; every later
download of the same file from the same source must match it, so a mirror or URL that starts
serving different bytes is caught even without a published digest. `nlp hub info` shows them.
"""

from __future__ import annotations

import json
from pathlib import Path

from filelock import FileLock

from nlp._common import atomic_write

__all__ = ["record", "recorded"]


def _path(cache: Path, name: str) -> Path:
    return cache / "records" / (name.replace("/", "--") + ".json")


def recorded(cache: Path, name: str) -> dict[str, dict[str, str]]:
    """{source label: {file name: sha256}} recorded for a model."""
    p = _path(cache, name)
    try:
        return json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def record(cache: Path, name: str, label: str, digests: dict[str, str]) -> None:
    p = _path(cache, name)
    p.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(p) + ".lock"):
        data = recorded(cache, name)
        data.setdefault(label, {}).update(digests)
        with atomic_write(p, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=1, sort_keys=True)
