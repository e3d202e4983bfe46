"""Ranking metrics per query group: where the relevant passage lands among the group's passages.

`group_metrics(scores, labels)`: per group, the passages sorted by score (a tie ranks the
relevant passage after the irrelevant ones it ties with: a constant scorer earns nothing), then
averaged over the groups: MRR (1 / rank of the first relevant passage), recall@1 and recall@10
(a relevant passage in the first 1 / 10), and nDCG@10 (binary gains). With the built-in groups
(one positive, a few mined negatives) recall@10 is 1 for groups of ten or fewer passages; the
retrieval benchmarks (benchmarks/retrieval.py) rank a whole corpus instead.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from nlp._common import DataError

__all__ = ["group_metrics", "ranks_of_relevant"]


def ranks_of_relevant(scores: np.ndarray, labels: np.ndarray) -> list[int]:
    """The 1-based rank of each relevant passage of one group (ties: pessimistic)."""
    scores, labels = np.asarray(scores, dtype=np.float64), np.asarray(labels) > 0
    return sorted(int((scores > scores[i]).sum() + (scores[~labels] == scores[i]).sum()) + 1
                  for i in np.flatnonzero(labels))


def group_metrics(scores: Sequence[Sequence[float]], labels: Sequence[Sequence[float]]) -> dict[str, float]:
    if len(scores) != len(labels):
        raise DataError(f"{len(scores)} groups of scores for {len(labels)} groups of labels")
    if not len(scores):
        raise DataError("no query groups to score")
    mrr, r1, r10, ndcg = [], [], [], []
    for s, y in zip(scores, labels):
        ranks = ranks_of_relevant(s, y)
        if not ranks:
            raise DataError("a query group has no relevant passage; every group needs one")
        mrr.append(1.0 / ranks[0])
        r1.append(float(ranks[0] <= 1))
        r10.append(float(ranks[0] <= 10))
        dcg = sum(1.0 / np.log2(r + 1) for r in ranks if r <= 10)
        ideal = sum(1.0 / np.log2(r + 1) for r in range(1, min(len(ranks), 10) + 1))
        ndcg.append(dcg / ideal)
    return {"mrr": float(np.mean(mrr)), "recall@1": float(np.mean(r1)), "recall@10": float(np.mean(r10)),
            "ndcg@10": float(np.mean(ndcg))}
