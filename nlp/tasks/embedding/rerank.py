"""Retrieve then rerank: a search's candidates in a reranker's order, or in the order of the
reranker's scores fused with the first stage's.

Fusion (`weight` set): over each query's candidates, the first-stage scores and the reranker's
are each standardised (mean 0, standard deviation 1) and summed, the reranker's times `weight`:

    score = z(retrieval score) + weight * z(reranker score)

Standardising puts a cosine (or hybrid score) and a logit on one scale per query without a
calibration fitted to either model. A reranker that alone orders the candidates worse than a
strong first stage can still add what the first stage misses; `weight` says how much, and is
chosen on a dev split (benchmarks/retrieval.py --rerank-weights), never on the test split.
A text-ranking pipeline is asked for its logits here (`raw_scores=True`): its sigmoid flattens
the differences among the very candidates that need telling apart.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from nlp._common import ConfigError, DataError

__all__ = ["fused_scores", "reranked_hits", "check_rerank_weight"]


def check_rerank_weight(weight: Any) -> float | None:
    """`weight` as a float (None: the reranker's order alone), or a ConfigError saying what is valid."""
    if weight is None:
        return None
    if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not math.isfinite(weight) or weight < 0:
        raise ConfigError(f"rerank_weight must be a finite number >= 0 (the reranker's weight in the fused "
                          f"score; None orders by the reranker alone), got {weight!r}")
    return float(weight)


def _standardised(scores: np.ndarray) -> np.ndarray:
    centred = scores - scores.mean(axis=-1, keepdims=True)
    spread = scores.std(axis=-1, keepdims=True)
    # equal scores carry no order: they standardise to 0, not to a division by zero
    return np.divide(centred, spread, out=np.zeros_like(centred), where=spread > 0)


def fused_scores(retrieval: Any, rerank: Any, weight: float) -> np.ndarray:
    """z(retrieval) + weight * z(rerank) along the last axis (each row: one query's candidates)."""
    first, second = np.asarray(retrieval, dtype=np.float64), np.asarray(rerank, dtype=np.float64)
    if first.shape != second.shape:
        raise DataError(f"retrieval scores of shape {first.shape} but reranker scores of shape {second.shape}; "
                        "give one of each per candidate")
    return _standardised(first) + weight * _standardised(second)


def _takes_raw_scores(rerank: Any) -> bool:
    try:
        return "raw_scores" in inspect.signature(rerank).parameters
    except (TypeError, ValueError):  # a builtin or C callable without a signature
        return False


def reranked_hits(rerank: Any, query: str | Sequence[str], hits: list, top_k: int,
                  weight: float | None = None) -> list:
    """`hits` (one query's list, or a list of lists) reordered, the first `top_k` of each: by
    `rerank`'s scores (`weight` None), or by their fusion with the hits' scores. Each hit keeps
    its first-stage score as "retrieval_score"; fused, "score" is the fused score and
    "rerank_score" what the reranker gave."""
    single = isinstance(query, str)
    queries, lists = ([query], [hits]) if single else (list(query), hits)
    options = {"raw_scores": True} if weight is not None and _takes_raw_scores(rerank) else {}
    out = []
    for q, row in zip(queries, lists):
        ranking = rerank(q, [h["text"] for h in row], **options) if row else []
        if sorted(r["index"] for r in ranking) != list(range(len(row))):
            raise DataError(f"rerank returned {len(ranking)} entries for {len(row)} passages; it must rank every "
                            "passage it is given ([{'index', 'score'}, ...], every index once)")
        if weight is None:
            out.append([{**row[r["index"]], "score": float(r["score"]), "retrieval_score": row[r["index"]]["score"]}
                        for r in ranking[:top_k]])
            continue
        given = np.empty(len(row))
        for r in ranking:
            given[r["index"]] = float(r["score"])
        fused = fused_scores([h["score"] for h in row], given, weight)
        order = np.argsort(-fused, kind="stable")[:top_k]  # ties: the first stage's order
        out.append([{**row[i], "score": float(fused[i]), "retrieval_score": row[i]["score"],
                     "rerank_score": float(given[i])} for i in order])
    return out[0] if single else out
