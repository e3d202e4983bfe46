"""Classification metrics: accuracy, macro-F1 and per-class scores; multi-label; regression.

Macro averages run over the labels present in gold or predictions (scikit-learn's default),
or over `labels` when given; an empty denominator counts as 0 (sklearn's zero_division=0).
"""

from __future__ import annotations

import math
from typing import Sequence

from nlp._common import DataError

__all__ = ["classification_metrics", "multilabel_metrics", "regression_metrics"]


def _prf(tp: int, n_pred: int, n_true: int) -> tuple[float, float, float]:
    p = tp / n_pred if n_pred else 0.0
    r = tp / n_true if n_true else 0.0
    return p, r, (2 * p * r / (p + r) if p + r else 0.0)


def classification_metrics(
    y_true: Sequence[int],
    y_pred: Sequence[int],
    *,
    labels: Sequence[int] | None = None,
    label_names: Sequence[str] | None = None,
) -> dict:
    """Accuracy, macro precision/recall/F1 and per-class scores of single-label predictions.

    Per-class keys are the label names when `label_names` is given (index = label id).
    """
    if len(y_true) != len(y_pred):
        raise DataError(f"{len(y_true)} gold labels but {len(y_pred)} predictions")
    if not len(y_true):
        raise DataError("no examples to score")
    y_true, y_pred = [int(y) for y in y_true], [int(y) for y in y_pred]
    classes = sorted(set(labels) if labels is not None else set(y_true) | set(y_pred))
    per_class = {}
    for c in classes:
        tp = sum(1 for t, p in zip(y_true, y_pred) if t == c and p == c)
        n_true = sum(1 for t in y_true if t == c)
        p, r, f = _prf(tp, sum(1 for y in y_pred if y == c), n_true)
        name = label_names[c] if label_names is not None and 0 <= c < len(label_names) else c
        per_class[name] = {"precision": p, "recall": r, "f1": f, "support": n_true}
    k = len(classes)
    return {
        "accuracy": sum(t == p for t, p in zip(y_true, y_pred)) / len(y_true),
        "macro_precision": sum(v["precision"] for v in per_class.values()) / k,
        "macro_recall": sum(v["recall"] for v in per_class.values()) / k,
        "macro_f1": sum(v["f1"] for v in per_class.values()) / k,
        "per_class": per_class,
    }


def multilabel_metrics(y_true: Sequence[Sequence[int]], y_pred: Sequence[Sequence[int]]) -> dict:
    """Multi-hot 0/1 rows: subset accuracy (exact match), micro-F1 and macro-F1 over columns."""
    if len(y_true) != len(y_pred) or not len(y_true):
        raise DataError(f"{len(y_true)} gold rows but {len(y_pred)} predicted rows (need equal, > 0)")
    width = len(y_true[0])
    tp, n_pred, n_true = [0] * width, [0] * width, [0] * width
    exact = 0
    for i, (t, p) in enumerate(zip(y_true, y_pred)):
        if len(t) != width or len(p) != width:
            raise DataError(f"row {i}: expected {width} columns, got {len(t)} gold and {len(p)} predicted")
        exact += all(int(a) == int(b) for a, b in zip(t, p))
        for j in range(width):
            tp[j] += int(t[j]) and int(p[j])
            n_pred[j] += int(p[j])
            n_true[j] += int(t[j])
    micro = _prf(sum(tp), sum(n_pred), sum(n_true))
    macro_f1 = sum(_prf(tp[j], n_pred[j], n_true[j])[2] for j in range(width)) / width
    return {"subset_accuracy": exact / len(y_true), "micro_precision": micro[0],
            "micro_recall": micro[1], "micro_f1": micro[2], "macro_f1": macro_f1}


def regression_metrics(y_true: Sequence[float], y_pred: Sequence[float]) -> dict:
    """Mean squared error, mean absolute error and Pearson's r (0.0 when a side is constant)."""
    n = len(y_true)
    if n != len(y_pred) or not n:
        raise DataError(f"{n} gold values but {len(y_pred)} predictions (need equal, > 0)")
    mt, mp = sum(y_true) / n, sum(y_pred) / n
    cov = sum((a - mt) * (b - mp) for a, b in zip(y_true, y_pred))
    vt = sum((a - mt) ** 2 for a in y_true)
    vp = sum((b - mp) ** 2 for b in y_pred)
    return {
        "mse": sum((a - b) ** 2 for a, b in zip(y_true, y_pred)) / n,
        "mae": sum(abs(a - b) for a, b in zip(y_true, y_pred)) / n,
        "pearson": cov / math.sqrt(vt * vp) if vt and vp else 0.0,
    }
