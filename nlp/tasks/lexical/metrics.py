"""Lexical-analysis metrics: word F1, POS accuracy, word+POS F1, entity F1.

- Word precision / recall / F1 are SIGHAN's (the bakeoff's ``score`` script): a predicted word is
  correct when a gold word has the same start and end in the same text, P = correct / predicted
  words, R = correct / gold words, F1 = 2PR / (P + R). Over the same characters this equals the
  script's alignment of the two word lists.
- POS accuracy: of the correctly segmented words, the share whose POS is also right (the usual
  figure beside word F1; it does not punish segmentation errors twice).
- Word+POS F1: as word F1, a word counting as correct only when its POS is right too.
- Entity F1: PER / LOC / ORG spans with exact type and boundaries (as `ner_metrics`), micro over
  types, with per-type figures.

Counts are summed over every sentence (micro averages); an empty denominator gives 0.0.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from nlp._common import DataError
from nlp.tasks.lexical.tags import Word, entities_from_words
from nlp.tasks.ner.metrics import prf

__all__ = ["lexical_metrics"]

Entity = tuple[str, int, int]


def lexical_metrics(gold: Sequence[Sequence[Word]], pred: Sequence[Sequence[Word]], *,
                    gold_entities: Sequence[Sequence[Entity]] | None = None,
                    pred_entities: Sequence[Sequence[Entity]] | None = None) -> dict:
    """Score predicted words ``(start, end, pos)`` against gold ones, sentence by sentence.

    Entities default to `entities_from_words` of each side's words. Returns ``{"word_precision",
    "word_recall", "word_f1", "pos_accuracy", "word_pos_f1", "entity_precision", "entity_recall",
    "entity_f1", "words", "entities", "per_type": {TYPE: {"precision", "recall", "f1", "support"}}}``
    ("words" and "entities" count the gold ones).
    """
    if len(gold) != len(pred):
        raise DataError(f"{len(gold)} gold sentences but {len(pred)} predicted ones")
    if gold_entities is None:
        gold_entities = [entities_from_words(ws) for ws in gold]
    if pred_entities is None:
        pred_entities = [entities_from_words(ws) for ws in pred]
    if len(gold_entities) != len(gold) or len(pred_entities) != len(gold):
        raise DataError("give one entity list per sentence on each side")
    n_gold = n_pred = seg_ok = pos_ok = 0
    ent_true: Counter = Counter()
    ent_pred: Counter = Counter()
    ent_tp: Counter = Counter()
    for i, (g, p) in enumerate(zip(gold, pred)):
        g_end = max((e for _, e, _ in g), default=0)
        p_end = max((e for _, e, _ in p), default=0)
        if g and p and g_end != p_end:
            raise DataError(f"sentence {i}: the gold words end at character {g_end} but the predicted ones "
                            f"at {p_end}; both must segment the same text")
        g_pos = {(s, e): t for s, e, t in g}
        n_gold, n_pred = n_gold + len(g), n_pred + len(p)
        for s, e, t in p:
            if (s, e) in g_pos:
                seg_ok += 1
                pos_ok += g_pos[(s, e)] == t
        ge, pe = set(map(tuple, gold_entities[i])), set(map(tuple, pred_entities[i]))
        ent_true.update(t for t, _, _ in ge)
        ent_pred.update(t for t, _, _ in pe)
        ent_tp.update(t for t, _, _ in ge & pe)
    wp, wr, wf = prf(seg_ok, n_pred, n_gold)
    _, _, pf = prf(pos_ok, n_pred, n_gold)
    ep, er, ef = prf(sum(ent_tp.values()), sum(ent_pred.values()), sum(ent_true.values()))
    per_type = {}
    for t in sorted(set(ent_true) | set(ent_pred)):
        p_, r_, f_ = prf(ent_tp[t], ent_pred[t], ent_true[t])
        per_type[t] = {"precision": p_, "recall": r_, "f1": f_, "support": ent_true[t]}
    return {"word_precision": wp, "word_recall": wr, "word_f1": wf,
            "pos_accuracy": pos_ok / seg_ok if seg_ok else 0.0, "word_pos_f1": pf,
            "entity_precision": ep, "entity_recall": er, "entity_f1": ef,
            "words": n_gold, "entities": sum(ent_true.values()), "per_type": per_type}
