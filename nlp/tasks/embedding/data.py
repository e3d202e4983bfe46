"""Reading embedding data: retrieval pairs / triples, scored pairs (STS), or plain texts (SimCSE).

One file holds one kind of record, told by its fields (names configurable, as reader options):

- ``{"query": ..., "positive": ..., "negative": ...}``: a query and its relevant text, with an
  optional hard negative; trained with InfoNCE over in-batch negatives, scored by retrieval
  (recall@1, recall@10, MRR: each query searches all positives of the split);
- ``{"text1": ..., "text2": ..., "score": ...}``: a pair with a similarity score; trained with
  CoSENT, scored by Spearman correlation of the cosines;
- ``{"text": ...}``, or a ``.txt`` file with one text a line: unlabelled text for unsupervised
  SimCSE (nothing to score).

JSON lines, a JSON array, or ``{"data": [...]}``. Columns of the Dataset: ``texts`` (the texts
of a record, in the order above) and, for scored pairs, ``score``. Records with a blank text
are skipped and counted; a missing field or a non-string text is an error naming the record.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from nlp._common import DataError
from nlp._extras import LazyModule
from nlp.tasks._io import ReadStats, iter_lines, load_json_records

datasets = LazyModule("datasets", "reading and preparing datasets")  # the train extra

__all__ = ["read_embedding", "record_kind", "KINDS"]

KINDS = ("retrieval", "scored", "text")


def _features(kind: str) -> datasets.Features:
    cols = {"texts": datasets.Sequence(datasets.Value("string"))}
    if kind == "scored":
        cols["score"] = datasets.Value("float32")
    return datasets.Features(cols)


def record_kind(columns: list[str]) -> str:
    """"retrieval", "scored" or "text" from a Dataset's columns / a record's kind."""
    return "scored" if "score" in columns else "retrieval"


def read_embedding(path: str | Path, *, query_column: str = "query", positive_column: str = "positive",
                   negative_column: str = "negative", text1_column: str = "text1", text2_column: str = "text2",
                   score_column: str = "score", text_column: str = "text", encoding: str = "utf-8",
                   return_stats: bool = False) -> Any:
    """One file -> a Dataset with ``texts`` (and ``score`` for scored pairs); see the module doc."""
    path = Path(path)
    stats = ReadStats(str(path))
    rows: list[list[str]] = []
    scores: list[float] = []
    kind = None
    if path.suffix == ".txt":
        kind = "text"
        for lineno, line in iter_lines(path, encoding):
            if line.strip():
                rows.append([line.strip()])
            else:
                stats.skip("blank lines")
    else:
        fields = {"retrieval": (query_column, positive_column), "scored": (text1_column, text2_column),
                  "text": (text_column,)}
        for where, rec in load_json_records(path, stats, encoding):
            if not isinstance(rec, dict):
                raise DataError(f"{where}: expected a JSON object, got {type(rec).__name__}")
            this = next((k for k, names in fields.items() if all(n in rec for n in names)), None)
            if this is None:
                raise DataError(f"{where}: a record needs {query_column!r} + {positive_column!r} (retrieval), "
                                f"{text1_column!r} + {text2_column!r} + {score_column!r} (scored pairs) or "
                                f"{text_column!r} (plain text); found fields {sorted(rec)}. Name other fields "
                                "with data.reader options, e.g. {query_column: question}")
            if kind is None:
                kind = this
            elif this != kind:
                raise DataError(f"{where}: a {this} record in a file of {kind} records; keep one kind per file")
            names = list(fields[kind])
            if kind == "retrieval" and rec.get(negative_column) is not None:
                names.append(negative_column)
            texts = []
            for name in names:
                value = rec[name]
                if not isinstance(value, str):
                    raise DataError(f"{where}: field {name!r} must be a string, got {type(value).__name__}")
                texts.append(value.strip())
            if not all(texts):
                stats.skip("records with a blank text")
                continue
            if kind == "retrieval" and rows and len(texts) != len(rows[0]):
                raise DataError(f"{where}: {len(texts) - 2} negatives where earlier records have "
                                f"{len(rows[0]) - 2}; give every record a {negative_column!r} or none")
            if kind == "scored":
                score = rec.get(score_column)
                if isinstance(score, bool) or not isinstance(score, (int, float)) or not math.isfinite(score):
                    raise DataError(f"{where}: {score_column!r} must be a finite number, got {score!r}")
                scores.append(float(score))
            rows.append(texts)
    if not rows:
        raise DataError(f"{path}: no records with text (skipped: {dict(stats.skipped) or 'none'})")
    cols: dict[str, list] = {"texts": rows}
    if kind == "scored":
        cols["score"] = scores
    ds = datasets.Dataset.from_dict(cols, features=_features(kind or "text"))
    stats.kept = len(ds)
    stats.log()
    return (ds, stats) if return_stats else ds
