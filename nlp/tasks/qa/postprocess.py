"""QA post-processing: n-best span search over all windows of an example, back to the context.

For each example, every window (feature) proposes spans from its `n_best` highest start and end
logits; a span must lie in the context (offsets not None), end at or after its start and be at
most `max_answer_length` tokens long. Spans from all windows compete on start + end logit; the
winner is cut out of the original context through the offsets. With `allow_impossible=True`
(SQuAD 2.0 / DuReader-robust style), the null score is the lowest [CLS] start + end logit over
the windows (as transformers' run_qa), and the answer is "" when null score - best span score
exceeds `null_threshold`.

`score` is the span's probability within its window (softmax over the window's start logits
times softmax over its end logits), as transformers' QA pipeline reports it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from nlp._common import DataError

__all__ = ["best_spans", "postprocess_qa"]


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max())
    return e / e.sum()


def best_spans(start_logits: np.ndarray, end_logits: np.ndarray, offsets: Sequence[Any], *,
               n_best: int = 20, max_answer_length: int = 30) -> list[dict]:
    """Candidate spans of one window: dicts with token start/end, char start/end, logit, score."""
    valid = np.array([o is not None for o in offsets], dtype=bool)
    if not valid.any():
        return []
    p_start = _softmax(np.where(valid, start_logits, -np.inf))
    p_end = _softmax(np.where(valid, end_logits, -np.inf))
    starts = [i for i in np.argsort(start_logits)[::-1] if valid[i]][:n_best]
    ends = [i for i in np.argsort(end_logits)[::-1] if valid[i]][:n_best]
    out = []
    for s in starts:
        for e in ends:
            if e < s or e - s + 1 > max_answer_length:
                continue
            out.append({"token_start": int(s), "token_end": int(e),
                        "start": int(offsets[s][0]), "end": int(offsets[e][1]),
                        "logit": float(start_logits[s] + end_logits[e]),
                        "score": float(p_start[s] * p_end[e])})
    return out


def postprocess_qa(
    examples: Mapping[str, Sequence[Any]] | Any,
    features: Mapping[str, Sequence[Any]] | Any,
    start_logits: Any,
    end_logits: Any,
    *,
    n_best: int = 20,
    max_answer_length: int = 30,
    allow_impossible: bool = False,
    null_threshold: float = 0.0,
) -> dict[str, dict]:
    """Predictions per example id: {"text", "start", "end", "score", "n_best": [...]}.

    `examples` has `id` and `context`; `features` has `example_id` and `offset_mapping` (as
    `preprocess_qa` writes them), one row per row of the logits. Logits may be padded to a
    longer length than a window's offsets; the extra positions are never chosen.
    """
    start_logits = np.asarray(start_logits, dtype=np.float64)
    end_logits = np.asarray(end_logits, dtype=np.float64)
    feat_ids = list(features["example_id"])
    feat_offsets = list(features["offset_mapping"])
    if len(feat_ids) != len(start_logits) or len(start_logits) != len(end_logits):
        raise DataError(f"{len(feat_ids)} features but {len(start_logits)} start / {len(end_logits)} "
                        "end logit rows; pass the logits of every feature, in order")
    by_example: dict[str, list[int]] = defaultdict(list)
    for i, eid in enumerate(feat_ids):
        by_example[str(eid)].append(i)
    results: dict[str, dict] = {}
    for eid, context in zip(examples["id"], examples["context"]):
        eid = str(eid)
        rows = by_example.get(eid)
        if not rows:
            raise DataError(f"example {eid!r} has no features; preprocess every example with preprocess_qa")
        candidates, null = [], None
        for r in rows:
            offs = feat_offsets[r]
            T = len(offs)
            sl, el = start_logits[r][:T], end_logits[r][:T]
            null = sl[0] + el[0] if null is None else min(null, sl[0] + el[0])
            candidates += best_spans(sl, el, offs, n_best=n_best, max_answer_length=max_answer_length)
        candidates.sort(key=lambda c: c["logit"], reverse=True)
        seen, nbest = set(), []
        for c in candidates:
            if (c["start"], c["end"]) in seen:
                continue
            seen.add((c["start"], c["end"]))
            nbest.append({"text": context[c["start"]:c["end"]], "start": c["start"], "end": c["end"],
                          "score": c["score"], "logit": c["logit"]})
            if len(nbest) == n_best:
                break
        best = nbest[0] if nbest else {"text": "", "start": 0, "end": 0, "score": 0.0, "logit": -np.inf}
        pred = {k: best[k] for k in ("text", "start", "end", "score")}
        pred["null_score"] = float(null)
        if not nbest or (allow_impossible and null - best["logit"] > null_threshold):
            pred.update(text="", start=0, end=0, score=0.0)
        pred["n_best"] = nbest
        results[eid] = pred
    return results
