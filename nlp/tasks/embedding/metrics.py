"""Embedding metrics: Spearman correlation for scored pairs (STS), recall@k and MRR for retrieval.

Both follow the usual definitions (C-MTEB / SentEval): Spearman's rho is Pearson's correlation
of the ranks, ties sharing their average rank; in retrieval every query has one relevant
document, `recall@k` is the share of queries whose relevant document ranks in the top k by
cosine, and MRR the mean of 1/rank (no cut-off).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from nlp._common import DataError

__all__ = ["spearman", "retrieval_metrics", "rank_metrics", "cosine_matrix", "sts_metrics"]


def _ranks(values: np.ndarray) -> np.ndarray:
    """1-based ranks, ties sharing the average of the ranks they span."""
    order = np.argsort(values, kind="mergesort")
    sorted_values = values[order]
    ranks = np.empty(len(values), dtype=np.float64)
    i = 0
    while i < len(values):
        j = i
        while j + 1 < len(values) and sorted_values[j + 1] == sorted_values[i]:
            j += 1
        ranks[order[i:j + 1]] = (i + j) / 2 + 1
        i = j + 1
    return ranks


def spearman(predicted: Sequence[float], gold: Sequence[float]) -> float:
    """Spearman's rank correlation of two equally long sequences (0.0 where either is constant)."""
    x = np.asarray(predicted, dtype=np.float64)
    y = np.asarray(gold, dtype=np.float64)
    if x.shape != y.shape or x.ndim != 1:
        raise DataError(f"spearman needs two 1-D sequences of equal length, got {x.shape} and {y.shape}")
    if len(x) < 2:
        raise DataError(f"spearman needs at least 2 pairs, got {len(x)}")
    if not (np.isfinite(x).all() and np.isfinite(y).all()):
        raise DataError("spearman got a NaN or infinite score; check the model's embeddings")
    rx, ry = _ranks(x), _ranks(y)
    rx -= rx.mean()
    ry -= ry.mean()
    denom = np.sqrt((rx * rx).sum() * (ry * ry).sum())
    return float((rx * ry).sum() / denom) if denom > 0 else 0.0


def cosine_matrix(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(n, m) cosine similarities of the rows of `a` (n, H) and `b` (m, H); a zero row scores 0."""
    a = np.asarray(a, dtype=np.float32)
    b = np.asarray(b, dtype=np.float32)
    an = a / np.maximum(np.linalg.norm(a, axis=-1, keepdims=True), 1e-12)
    bn = b / np.maximum(np.linalg.norm(b, axis=-1, keepdims=True), 1e-12)
    return an @ bn.T


def sts_metrics(embeddings_1: np.ndarray, embeddings_2: np.ndarray, gold: Sequence[float]) -> dict[str, float]:
    """{"spearman"}: of the pairs' cosine similarities against the gold scores."""
    a = np.asarray(embeddings_1, dtype=np.float32)
    b = np.asarray(embeddings_2, dtype=np.float32)
    norms = np.maximum(np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1), 1e-12)
    cos = (a * b).sum(-1) / norms  # pair by pair, not the (n, n) matrix's diagonal
    return {"spearman": spearman(cos.tolist(), list(gold))}


def rank_metrics(scores: np.ndarray, relevant: Sequence[int], ks: Sequence[int] = (1, 10)) -> dict[str, float]:
    """recall@k for each k, and MRR, from a (queries, documents) score matrix (higher is
    closer: cosines, BM25 scores) and `relevant[i]`, the row of query i's document. Ties rank
    pessimistically (a document scoring the same as the relevant one counts as ahead of it), so
    a constant model scores no better than its worst case."""
    scores = np.asarray(scores)
    relevant = np.asarray(relevant, dtype=np.int64)
    if scores.ndim != 2 or len(relevant) != scores.shape[0]:
        raise DataError(f"{len(relevant)} relevant documents for a score matrix of shape {scores.shape}")
    if not len(relevant):
        raise DataError("retrieval metrics need at least one query")
    if relevant.min() < 0 or relevant.max() >= scores.shape[1]:
        raise DataError(f"a relevant document index is outside the {scores.shape[1]} documents")
    if not np.isfinite(scores).all():
        raise DataError("retrieval got a NaN or infinite score; check the model's embeddings")
    gold = scores[np.arange(len(scores)), relevant]
    ranks = (scores >= gold[:, None]).sum(axis=1)  # 1 = first
    out = {f"recall@{k}": float((ranks <= k).mean()) for k in ks}
    out["mrr"] = float((1.0 / ranks).mean())
    return out


def retrieval_metrics(queries: np.ndarray, documents: np.ndarray, relevant: Sequence[int],
                      ks: Sequence[int] = (1, 10)) -> dict[str, float]:
    """`rank_metrics` of `queries` (n, H) searching `documents` (m, H) by cosine."""
    queries = np.asarray(queries, dtype=np.float32)
    documents = np.asarray(documents, dtype=np.float32)
    if queries.ndim != 2 or documents.ndim != 2 or queries.shape[1] != documents.shape[1]:
        raise DataError(f"queries {queries.shape} and documents {documents.shape} must be (n, H) and (m, H)")
    return rank_metrics(cosine_matrix(queries, documents), relevant, ks)
