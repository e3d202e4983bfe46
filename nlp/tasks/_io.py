"""What every reader shares: read statistics, skipped-record accounting, json lines.

Readers parse files themselves (then build a `datasets.Dataset` with ``from_list``) instead
of calling ``load_dataset("json"/"csv")``, because a useful error must name the file and the
line, and `datasets`' Arrow readers report neither.
"""

from __future__ import annotations

import json
import logging
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from nlp._common import DataError

__all__ = ["ReadStats", "iter_lines", "load_json_records"]

logger = logging.getLogger(__name__)


@dataclass
class ReadStats:
    """What a reader kept and what it skipped on purpose, by reason (never silently)."""

    source: str
    kept: int = 0
    skipped: Counter = field(default_factory=Counter)
    repaired: Counter = field(default_factory=Counter)

    def skip(self, reason: str, n: int = 1) -> None:
        self.skipped[reason] += n

    def repair(self, reason: str, n: int = 1) -> None:
        self.repaired[reason] += n

    def log(self) -> None:
        """One INFO line when anything was skipped or repaired, else DEBUG."""
        extra = ""
        if self.skipped:
            extra += "; skipped " + ", ".join(f"{n} {r}" for r, n in sorted(self.skipped.items()))
        if self.repaired:
            extra += "; repaired " + ", ".join(f"{n} {r}" for r, n in sorted(self.repaired.items()))
        level = logging.INFO if extra else logging.DEBUG
        logger.log(level, "%s: kept %d records%s", self.source, self.kept, extra)

    def to_dict(self) -> dict:
        return {"source": self.source, "kept": self.kept,
                "skipped": dict(self.skipped), "repaired": dict(self.repaired)}


def iter_lines(path: str | os.PathLike) -> Iterator[tuple[int, str]]:
    """(1-based line number, line without its newline); a missing file is a DataError."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: no such file")
    try:
        with open(path, encoding="utf-8-sig") as f:
            for lineno, line in enumerate(f, 1):
                yield lineno, line.rstrip("\r\n")
    except UnicodeDecodeError as err:
        raise DataError(f"{path}: not UTF-8 text ({err})") from err


def load_json_records(
    path: str | os.PathLike, stats: ReadStats | None = None
) -> Iterator[tuple[str, object]]:
    """(location, record) pairs from a JSON array, ``{"data": [...]}``, or JSON lines.

    CLUE ships JSON lines under a ``.json`` name, so the content decides, not the suffix.
    """
    path = Path(path)
    lines = list(iter_lines(path))
    text = "\n".join(line for _, line in lines).strip()
    if text.startswith("["):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as err:
            raise DataError(f"{path}:{err.lineno}: malformed JSON ({err.msg})") from err
        for i, rec in enumerate(data):
            yield f"{path} record {i}", rec
        return
    if text.startswith("{"):
        try:
            whole = json.loads(text)
        except json.JSONDecodeError:
            whole = None  # JSON lines: one object per line
        if isinstance(whole, dict) and isinstance(whole.get("data"), list):
            for i, rec in enumerate(whole["data"]):
                yield f"{path} record {i}", rec
            return
    for lineno, line in lines:
        if not line.strip():
            if stats is not None:
                stats.skip("blank lines")
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as err:
            raise DataError(f"{path}:{lineno}: malformed JSON line ({err.msg})") from err
        yield f"{path}:{lineno}", rec
