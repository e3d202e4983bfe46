"""Read text classification files (jsonl / json / csv / tsv) into a `datasets.Dataset`.

Output columns: ``text``, ``text_pair`` (pairs only), ``label`` when the file has labels:
a ``ClassLabel`` id (single label), a list of ``ClassLabel`` ids (multi-label) or a float
(regression). Label names travel in the features, so ``ds.features["label"].names`` is the
label vocabulary. Column names in the file are configurable (CLUE's ``sentence``,
ChnSentiCorp's ``text_a``, LCQMC's ``query``/``title``...).
"""

from __future__ import annotations

import csv
import os
from pathlib import Path
from typing import Iterator, Sequence

from nlp._common import DataError
from nlp._extras import LazyModule
from nlp.tasks._io import ReadStats, decode_error, iter_lines, load_json_records, open_text

datasets = LazyModule("datasets", "reading and preparing datasets")  # the train extra

__all__ = ["read_classification", "PROBLEM_TYPES"]

PROBLEM_TYPES = ("single_label_classification", "multi_label_classification", "regression")
_FORMATS = {".jsonl": "json", ".json": "json", ".csv": "csv", ".tsv": "tsv", ".txt": "tsv"}


def _rows_from_table(path: Path, fmt: str, column_names: Sequence[str] | None, stats: ReadStats,
                     encoding: str) -> Iterator[tuple[str, dict]]:
    header = list(column_names) if column_names else None
    lines = iter_lines(path, encoding)
    if fmt == "csv":
        if not path.is_file():
            raise DataError(f"{path}: no such file")
        # csv quoting can span lines; csv.reader tracks the line number itself
        try:
            with open_text(path, encoding, newline="") as f:
                reader = csv.reader(f)
                for row in reader:
                    if header is None:
                        header = row
                        continue
                    if not any(cell.strip() for cell in row):
                        stats.skip("blank lines")
                        continue
                    yield from _zip_row(path, reader.line_num, header, row)
        except UnicodeDecodeError as err:
            raise decode_error(path, encoding, err) from None
        return
    # tsv: split on tabs only; quotes are ordinary characters in Chinese review text
    for lineno, line in lines:
        if header is None:
            header = line.split("\t")
            continue
        if not line.strip():
            stats.skip("blank lines")
            continue
        yield from _zip_row(path, lineno, header, line.split("\t"))


def _zip_row(path: Path, lineno: int, header: list[str], row: list[str]) -> Iterator[tuple[str, dict]]:
    if len(row) != len(header):
        raise DataError(f"{path}:{lineno}: {len(row)} fields but the header has {len(header)} "
                        f"({', '.join(header)})")
    yield f"{path}:{lineno}", dict(zip(header, row))


def _label_id(value, where: str, name2id: dict[str, int] | None, n: int | None) -> int:
    if name2id is not None and str(value) in name2id:
        return name2id[str(value)]
    if isinstance(value, int) and not isinstance(value, bool) and n is not None and 0 <= value < n:
        return value
    valid = ", ".join(list(name2id)[:20]) if name2id else f"0..{(n or 1) - 1}"
    raise DataError(f"{where}: label {value!r} is not in the label set ({valid}). "
                    "Pass label_names= with every label, or fix the record.")


def read_classification(
    path: str | os.PathLike,
    *,
    format: str | None = None,
    text_column: str = "text",
    text_pair_column: str | None = None,
    label_column: str = "label",
    label_names: Sequence[str] | None = None,
    problem_type: str = "single_label_classification",
    column_names: Sequence[str] | None = None,
    ignore_labels: Sequence[str] = (),
    skip_empty: bool = False,
    deduplicate: bool = False,
    require_labels: bool = False,
    encoding: str = "utf-8",
    return_stats: bool = False,
) -> datasets.Dataset | tuple[datasets.Dataset, ReadStats]:
    """Read one classification file.

    Args:
        format: "json" (also JSON lines), "csv" or "tsv"; inferred from the suffix if None.
        text_pair_column: second text of a pair task; None reads single texts.
        label_names: the label set, in id order. Labels in the file may be these names or
            integer ids. None infers the sorted set of labels found (ints stay ids).
        column_names: header for a tsv/csv file without a header line.
        ignore_labels: label values whose records are skipped and counted (OCNLI's "-").
        skip_empty: skip (and count) records with an empty text instead of raising.
        deduplicate: skip (and count) repeats of an earlier (text, text_pair).
        require_labels: a file whose records have no `label_column` value is an error (a
            training file), instead of an unlabelled dataset (a test file).
        encoding: the file's text encoding, e.g. "gbk" (default UTF-8, with or without a BOM).
        return_stats: also return the `ReadStats` of kept and skipped records.
    A label outside `label_names`, an empty text or a malformed line raises `DataError`
    naming the file and line.
    """
    path = Path(path)
    if problem_type not in PROBLEM_TYPES:
        raise DataError(f"Unknown problem_type {problem_type!r}; valid: {', '.join(PROBLEM_TYPES)}")
    fmt = format or _FORMATS.get(path.suffix.lower())
    if fmt not in ("json", "csv", "tsv"):
        raise DataError(f"{path}: cannot tell the format from {path.suffix!r}; pass format= "
                        "'json', 'csv' or 'tsv'")
    stats = ReadStats(str(path))
    records = (load_json_records(path, stats, encoding) if fmt == "json"
               else _rows_from_table(path, fmt, column_names, stats, encoding))
    rows: list[tuple[str, str, str | None, object]] = []
    seen: set = set()
    has_label: bool | None = None
    for where, rec in records:
        if not isinstance(rec, dict):
            raise DataError(f"{where}: expected an object with {text_column!r}, got {type(rec).__name__}")
        if has_label is None and require_labels and rec.get(label_column) in (None, ""):
            found = ", ".join(map(str, rec)) or "none"
            raise DataError(f"{where}: no {label_column!r} label, but this file must have labels (it "
                            f"is trained on or scored); columns found: {found}. Name the label column "
                            "with label_column= (data.reader.label_column in a recipe).")
        if text_column not in rec:
            raise DataError(f"{where}: no {text_column!r} field (fields: {', '.join(map(str, rec))}); "
                            "pass text_column=")
        text = "" if rec[text_column] is None else str(rec[text_column]).strip()
        pair = None
        if text_pair_column is not None:
            if text_pair_column not in rec:
                raise DataError(f"{where}: no {text_pair_column!r} field; pass text_pair_column=")
            pair = "" if rec[text_pair_column] is None else str(rec[text_pair_column]).strip()
        if not text or (pair is not None and not pair):
            if skip_empty:
                stats.skip("empty texts")
                continue
            raise DataError(f"{where}: empty text. Fix the record or pass skip_empty=True.")
        labelled = label_column in rec and rec[label_column] not in (None, "")
        if has_label is None:
            has_label = labelled
        elif labelled != has_label:
            raise DataError(f"{where}: {'has' if labelled else 'has no'} {label_column!r} value, "
                            f"unlike the records before it")
        if labelled and str(rec[label_column]) in ignore_labels:
            stats.skip(f"records labelled {rec[label_column]!r}")
            continue
        if deduplicate:
            key = (text, pair)
            if key in seen:
                stats.skip("duplicates")
                continue
            seen.add(key)
        rows.append((where, text, pair, rec.get(label_column) if labelled else None))
    ds = _build(rows, bool(has_label), label_names, problem_type, text_pair_column is not None)
    stats.kept = len(ds)
    stats.log()
    return (ds, stats) if return_stats else ds


def _build(rows, has_label: bool, label_names, problem_type: str, paired: bool) -> datasets.Dataset:
    feats = {"text": datasets.Value("string")}
    if paired:
        feats["text_pair"] = datasets.Value("string")
    columns: dict[str, list] = {"text": [r[1] for r in rows]}
    if paired:
        columns["text_pair"] = [r[2] for r in rows]
    if has_label:
        if problem_type == "regression":
            values = []
            for where, _, _, value in rows:
                try:
                    values.append(float(value))
                except (TypeError, ValueError):
                    raise DataError(f"{where}: regression label {value!r} is not a number") from None
            columns["label"] = values
            feats["label"] = datasets.Value("float32")
        else:
            multi = problem_type == "multi_label_classification"
            raw = []
            for where, _, _, value in rows:
                if multi:
                    if isinstance(value, str):
                        value = [v for v in value.replace(",", " ").split() if v]
                    if not isinstance(value, list):
                        raise DataError(f"{where}: multi-label value {value!r} is not a list")
                    raw.append((where, value))
                else:
                    raw.append((where, [value]))
            names = list(label_names) if label_names is not None else _infer_names(v for _, vs in raw for v in vs)
            name2id = {str(n): i for i, n in enumerate(names)}
            ids = [[_label_id(v, where, name2id, len(names)) for v in vs] for where, vs in raw]
            label = datasets.ClassLabel(names=[str(n) for n in names])
            feats["label"] = datasets.Sequence(label) if multi else label
            columns["label"] = ids if multi else [i[0] for i in ids]
    return datasets.Dataset.from_dict(columns, features=datasets.Features(feats))


def _infer_names(values) -> list[str]:
    values = list(values)
    if values and all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        return [str(i) for i in range(max(values) + 1)]
    return sorted({str(v) for v in values})
