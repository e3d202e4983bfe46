"""SIGHAN-style scores of spelling correction, at sentence and at character level.

Per sentence: the source (as written), the gold target, the prediction. A sentence is *positive*
when its gold target differs from its source, *predicted positive* when the prediction changes
anything. At sentence level (the figures of SpellGCN, ReaLiSe and the papers after them):

- detection: a hit is a predicted positive whose changed positions are exactly the gold wrong
  positions; precision = hits / predicted positives, recall = hits / positives;
- correction: a hit is a predicted positive equal to the gold target;
- false-positive rate: the share of correct sentences (source == target) the prediction changes.

At character level, over sentences whose source and target have the same length (a pair of
different lengths counts only at sentence level): detection precision = changed positions that
are wrong / changed positions, recall = / wrong positions; correction the same with the right
character written.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["csc_metrics", "prf"]


def prf(hits: int, predicted: int, gold: int) -> tuple[float, float, float]:
    """(precision, recall, F1); 0.0 where a denominator is 0."""
    p = hits / predicted if predicted else 0.0
    r = hits / gold if gold else 0.0
    return p, r, (2 * p * r / (p + r) if p + r else 0.0)


def _changes(a: str, b: str) -> set[int]:
    return {i for i, (x, y) in enumerate(zip(a, b)) if x != y} if len(a) == len(b) else {-1}


def csc_metrics(sources: Sequence[str], targets: Sequence[str], predictions: Sequence[str]) -> dict[str, float]:
    """The sentence- and character-level scores (keys `sentence_detection_f1`,
    `sentence_correction_f1`, their `_precision` / `_recall`, `false_positive_rate`,
    `char_detection_*`, `char_correction_*`, and the counts they come from)."""
    if not len(sources) == len(targets) == len(predictions):
        raise ValueError(f"{len(sources)} sources, {len(targets)} targets and {len(predictions)} predictions; "
                         "give one of each per sentence")
    positives = predicted = det_hits = cor_hits = clean = false_pos = 0
    c_gold = c_pred = c_det = c_cor = 0
    for src, tgt, pred in zip(sources, targets, predictions):
        if len(pred) != len(src):
            raise ValueError(f"a prediction of {len(pred)} characters for a source of {len(src)}: {pred!r}")
        gold_pos, pred_pos = _changes(src, tgt), _changes(src, pred)
        positives += src != tgt
        clean += src == tgt
        if pred != src:
            predicted += 1
            false_pos += src == tgt
            det_hits += src != tgt and pred_pos == gold_pos
            cor_hits += src != tgt and pred == tgt
        if len(src) == len(tgt):
            c_gold += len(gold_pos)
            c_pred += len(pred_pos)
            c_det += len(pred_pos & gold_pos)
            c_cor += sum(pred[i] == tgt[i] for i in pred_pos & gold_pos)
    out: dict[str, float] = {}
    for name, (hits, pred_n, gold_n) in {"sentence_detection": (det_hits, predicted, positives),
                                         "sentence_correction": (cor_hits, predicted, positives),
                                         "char_detection": (c_det, c_pred, c_gold),
                                         "char_correction": (c_cor, c_pred, c_gold)}.items():
        p, r, f = prf(hits, pred_n, gold_n)
        out.update({f"{name}_precision": p, f"{name}_recall": r, f"{name}_f1": f})
    out["false_positive_rate"] = false_pos / clean if clean else 0.0
    out.update({"sentences": float(len(sources)), "sentences_with_errors": float(positives),
                "sentences_changed": float(predicted), "correct_sentences_changed": float(false_pos)})
    return out
