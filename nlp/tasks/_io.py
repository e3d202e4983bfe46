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

__all__ = ["ReadStats", "iter_lines", "open_text", "decode_error", "load_json_records"]

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


def decode_error(path: str | os.PathLike, encoding: str, err: UnicodeDecodeError) -> DataError:
    """A DataError naming the file and line where `path` stops being `encoding` text, and the
    option that reads another encoding (the byte offset of `err` is lost when files are read in
    chunks, so the file is decoded once more here, on the error path only)."""
    raw = Path(path).read_bytes()
    try:
        raw.decode(_codec(encoding))
    except UnicodeDecodeError as whole:
        err = whole
    line = raw.count(b"\n", 0, err.start) + 1
    bad = raw[err.start:err.start + 4]
    example = "gb18030" if _codec(encoding).lower() == "gbk" else "gbk"
    return DataError(f"{path}:{line}: not {encoding} text (bytes {bad!r}...). Pass the file's "
                     f"encoding, e.g. encoding='{example}' (data.reader.encoding: {example} in a recipe); "
                     "GBK is common for Chinese files")


def _codec(encoding: str) -> str:
    # A UTF-8 byte-order mark (Windows editors write one) is not part of the first field.
    return "utf-8-sig" if encoding.lower().replace("_", "-") in ("utf-8", "utf8") else encoding


def open_text(path: str | os.PathLike, encoding: str = "utf-8", newline: str | None = None):
    """Open a text file for reading; an unknown encoding name is a DataError."""
    import codecs

    try:
        codecs.lookup(encoding)
    except LookupError:
        raise DataError(f"unknown encoding {encoding!r}; e.g. 'utf-8', 'gbk', 'gb18030', 'big5'") from None
    return open(path, encoding=_codec(encoding), newline=newline)


def iter_lines(path: str | os.PathLike, encoding: str = "utf-8") -> Iterator[tuple[int, str]]:
    """(1-based line number, line without its newline); a missing file, or bytes that are not
    `encoding` text, are a DataError naming the file (and line)."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: no such file")
    try:
        with open_text(path, encoding) as f:
            for lineno, line in enumerate(f, 1):
                yield lineno, line.rstrip("\r\n")
    except UnicodeDecodeError as err:
        raise decode_error(path, encoding, err) from None


def load_json_records(
    path: str | os.PathLike, stats: ReadStats | None = None, encoding: str = "utf-8"
) -> Iterator[tuple[str, object]]:
    """(location, record) pairs from a JSON array, ``{"data": [...]}``, or JSON lines.

    CLUE ships JSON lines under a ``.json`` name, so the content decides, not the suffix.
    """
    path = Path(path)
    lines = list(iter_lines(path, encoding))
    text = "\n".join(line for _, line in lines).strip()
    if text.startswith("["):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as err:
            raise DataError(f"{path}:{err.lineno}: malformed JSON ({err.msg})") from err
        for i, rec in enumerate(data):
            yield _text_only(f"{path} record {i}", rec)
        return
    if text.startswith("{"):
        try:
            whole = json.loads(text)
        except json.JSONDecodeError:
            whole = None  # JSON lines: one object per line
        if isinstance(whole, dict) and isinstance(whole.get("data"), list):
            for i, rec in enumerate(whole["data"]):
                yield _text_only(f"{path} record {i}", rec)
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
        yield _text_only(f"{path}:{lineno}", rec)


def _text_only(location: str, record: object, field: str = "") -> tuple[str, object]:
    """(location, record), or DataError naming the record and field where a string holds a lone
    surrogate: JSON escapes half of a pair ("\\ud800") as valid JSON, but it is not text, and the
    dataset writer would fail on it with a trace."""
    values = record.items() if isinstance(record, dict) else enumerate(record) if isinstance(record, list) else ()
    for key, value in values:
        where = f"{field}.{key}" if isinstance(key, str) else f"{field}[{key}]"
        if isinstance(value, str):
            try:
                value.encode("utf-8")
            except UnicodeEncodeError as err:
                raise DataError(f"{location}: {where.lstrip('.')} holds a lone surrogate {value[err.start]!r} at "
                                f"character {err.start} (half of a UTF-16 pair, escaped in the JSON: not text); "
                                "fix the escape or drop the record") from None
        elif isinstance(value, (dict, list)):
            _text_only(location, value, where)
    return location, record
