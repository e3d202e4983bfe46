"""Span F1 of extraction, overall and per type: a predicted span counts when its (record,
start, end) is a gold span of that record; a record's type (the entity type or role its prompt
asks for) groups the scores. Negative records (no gold span) count their false positives."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

__all__ = ["span_f1"]


def _prf(tp: int, n_pred: int, n_gold: int) -> tuple[float, float, float]:
    p = tp / n_pred if n_pred else 0.0
    r = tp / n_gold if n_gold else 0.0
    return p, r, (2 * p * r / (p + r) if p + r else 0.0)


def span_f1(predicted: Sequence[Iterable[tuple[int, int]]], gold: Sequence[Iterable[tuple[int, int]]],
            types: Sequence[str]) -> dict[str, float]:
    """{"precision", "recall", "f1"} over every record, and "f1/<type>" (and precision, recall)
    per type, from each record's predicted and gold (start, end) spans."""
    counts: dict[str, list[int]] = {}
    for pred, ref, type_ in zip(predicted, gold, types):
        pred, ref = set(map(tuple, pred)), set(map(tuple, ref))
        for key in ("", type_):
            c = counts.setdefault(key, [0, 0, 0])
            c[0] += len(pred & ref)
            c[1] += len(pred)
            c[2] += len(ref)
    out: dict[str, float] = {}
    for key, (tp, n_pred, n_gold) in sorted(counts.items()):
        p, r, f = _prf(tp, n_pred, n_gold)
        suffix = f"/{key}" if key else ""
        out.update({f"precision{suffix}": p, f"recall{suffix}": r, f"f1{suffix}": f})
    if "" not in counts:
        out.update(precision=0.0, recall=0.0, f1=0.0)
    return out
