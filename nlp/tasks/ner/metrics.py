"""Entity-level precision / recall / F1, overall (micro) and per type.

The default mode equals ``seqeval.metrics`` (``precision_score``, ``recall_score``,
``f1_score``, ``classification_report``) on the same tags: conlleval's lenient extraction,
exact span + type match, zero when a denominator is zero. ``mode="strict"`` equals seqeval's
``mode="strict"`` with the IOB2 or IOBES scheme. Implemented here rather than calling seqeval
so the toolkit does not depend on it at run time (seqeval is a test-only dependency).
"""

from __future__ import annotations

from collections import Counter
from typing import Sequence

from nlp._common import DataError
from nlp.tasks.ner.tags import get_entities, get_entities_strict

__all__ = ["ner_metrics", "prf"]


def prf(tp: int, n_pred: int, n_true: int) -> tuple[float, float, float]:
    """Precision, recall, F1 with 0.0 for an empty denominator (seqeval's zero_division)."""
    p = tp / n_pred if n_pred else 0.0
    r = tp / n_true if n_true else 0.0
    f = 2 * p * r / (p + r) if p + r else 0.0
    return p, r, f


def ner_metrics(
    y_true: Sequence[Sequence[str]],
    y_pred: Sequence[Sequence[str]],
    *,
    mode: str | None = None,
    scheme: str = "BIO",
) -> dict:
    """Score predicted tag sequences against gold ones.

    Returns ``{"precision", "recall", "f1", "support", "per_type": {TYPE: {"precision",
    "recall", "f1", "support"}}}``; support counts gold entities.
    """
    if mode not in (None, "strict"):
        raise DataError(f"Unknown mode {mode!r}; valid: None (conlleval, seqeval's default), 'strict'")
    if len(y_true) != len(y_pred):
        raise DataError(f"{len(y_true)} gold sequences but {len(y_pred)} predicted ones")
    true_count: Counter = Counter()
    pred_count: Counter = Counter()
    tp_count: Counter = Counter()
    for i, (gold, pred) in enumerate(zip(y_true, y_pred)):
        if len(gold) != len(pred):
            raise DataError(f"sequence {i}: {len(gold)} gold tags but {len(pred)} predicted tags")
        if mode == "strict":
            g, p = set(get_entities_strict(gold, scheme)), set(get_entities_strict(pred, scheme))
        else:
            g, p = set(get_entities(gold)), set(get_entities(pred))
        true_count.update(t for t, _, _ in g)
        pred_count.update(t for t, _, _ in p)
        tp_count.update(t for t, _, _ in g & p)
    precision, recall, f1 = prf(sum(tp_count.values()), sum(pred_count.values()), sum(true_count.values()))
    per_type = {}
    for type_ in sorted(set(true_count) | set(pred_count)):
        tp, tn = prf(tp_count[type_], pred_count[type_], true_count[type_]), true_count[type_]
        per_type[type_] = {"precision": tp[0], "recall": tp[1], "f1": tp[2], "support": tn}
    return {
        "precision": precision,
        "recall": recall,
        "f1": f1,
        "support": sum(true_count.values()),
        "per_type": per_type,
    }
