"""Embedding metrics: Spearman correlation for scored pairs (STS), recall@k and MRR for retrieval.

Both follow the usual definitions (C-MTEB / SentEval): Spearman's rho is Pearson's correlation
of the ranks, ties sharing their average rank; in retrieval every query has one relevant
document, `recall@k` is the share of queries whose relevant document ranks in the top k by
cosine (or by hybrid score, cosine + lexical score, for a model with lexical weights), and MRR
the mean of 1/rank (no cut-off).

A text's lexical (sparse) vector is a pair of arrays: its distinct keys, ascending, and each
one's weight (the largest of its occurrences' weights; keys of weight 0 are left out). A key is a
token id, or for a model with bigram weights also a pair of adjacent token ids (a, b), keyed
(a + 1) * 2**32 + b (`bigram_keys`): above every token id, so the two kinds never meet.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from nlp._common import DataError
from nlp._extras import require

__all__ = ["spearman", "retrieval_metrics", "rank_metrics", "cosine_matrix", "sts_metrics", "SparseVector",
           "sparse_vector", "pooled_sparse_vector", "lexical_scores", "lexical_pair_scores", "BIGRAM_BASE",
           "bigram_keys", "split_key", "lexical_terms"]

SparseVector = tuple[np.ndarray, np.ndarray]  # (distinct keys ascending, their weights)
BIGRAM_BASE = 1 << 32  # bigram (a, b) -> (a + 1) * BIGRAM_BASE + b: above any token id (< 2**32)
_CHUNK_ROWS = 1024  # query rows scored at a time


def bigram_keys(first, second):
    """The keys of adjacent token-id pairs (first[i], second[i]): numpy arrays or torch tensors of
    int64, elementwise. Below 2**53 for vocabularies of fewer than 2**21 - 1 ids (two million), so
    exact as JSON numbers."""
    return (first + 1) * BIGRAM_BASE + second


def split_key(key: int) -> tuple[int, ...]:
    """A key's token ids: (id,) for a token, (a, b) for a bigram."""
    key = int(key)
    return (key,) if key < BIGRAM_BASE else (key // BIGRAM_BASE - 1, key % BIGRAM_BASE)


def lexical_terms(token_ids: Sequence[int] | np.ndarray, token_weights: Sequence[float] | np.ndarray,
                  bigram_weights: Sequence[float] | np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """One window's (keys, weights) before pooling: each token's id and weight, and with
    `bigram_weights` (position t: the pair of tokens t and t + 1) each adjacent pair's key and
    weight. `sparse_vector` of the result is the window's sparse vector."""
    ids = np.asarray(token_ids, dtype=np.int64).reshape(-1)
    weights = np.asarray(token_weights, dtype=np.float32).reshape(-1)
    if ids.shape != weights.shape:
        raise DataError(f"{len(ids)} token ids but {len(weights)} weights")
    if bigram_weights is None:
        return ids, weights
    pair_weights = np.asarray(bigram_weights, dtype=np.float32).reshape(-1)
    if pair_weights.shape != ids.shape:
        raise DataError(f"{len(ids)} token ids but {len(pair_weights)} bigram weights")
    keys = bigram_keys(ids[:-1], ids[1:])
    return np.concatenate([ids, keys]), np.concatenate([weights, pair_weights[:-1]])


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


def sts_metrics(embeddings_1: np.ndarray, embeddings_2: np.ndarray, gold: Sequence[float],
                lexical: tuple[Sequence[SparseVector], Sequence[SparseVector]] | None = None) -> dict[str, float]:
    """{"spearman"}: of the pairs' cosine similarities (plus their lexical scores, when given)
    against the gold scores."""
    a = np.asarray(embeddings_1, dtype=np.float32)
    b = np.asarray(embeddings_2, dtype=np.float32)
    norms = np.maximum(np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1), 1e-12)
    scores = (a * b).sum(-1) / norms  # pair by pair, not the (n, n) matrix's diagonal
    if lexical is not None:
        scores = scores + lexical_pair_scores(*lexical)
    return {"spearman": spearman(scores.tolist(), list(gold))}


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
                      ks: Sequence[int] = (1, 10),
                      lexical: tuple[Sequence[SparseVector], Sequence[SparseVector]] | None = None) -> dict[str, float]:
    """`rank_metrics` of `queries` (n, H) searching `documents` (m, H) by cosine, or by hybrid
    score (cosine + lexical score) when `lexical` gives the queries' and documents' sparse vectors."""
    queries = np.asarray(queries, dtype=np.float32)
    documents = np.asarray(documents, dtype=np.float32)
    if queries.ndim != 2 or documents.ndim != 2 or queries.shape[1] != documents.shape[1]:
        raise DataError(f"queries {queries.shape} and documents {documents.shape} must be (n, H) and (m, H)")
    scores = cosine_matrix(queries, documents)
    if lexical is not None:
        scores = scores + lexical_scores(*lexical)
    return rank_metrics(scores, relevant, ks)


def sparse_vector(token_ids: Sequence[int] | np.ndarray, weights: Sequence[float] | np.ndarray) -> SparseVector:
    """One text's tokens (or `lexical_terms` keys) and their lexical weights -> its sparse
    vector: per distinct key, the largest weight; keys whose weight is 0 (padding, [CLS], [SEP],
    relu's zeros) are dropped."""
    ids = np.asarray(token_ids, dtype=np.int64).reshape(-1)
    w = np.asarray(weights, dtype=np.float32).reshape(-1)
    if ids.shape != w.shape:
        raise DataError(f"{len(ids)} token ids but {len(w)} weights")
    keep = w > 0
    ids, w = ids[keep], w[keep]
    if not len(ids):
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
    order = np.lexsort((-w, ids))  # by id, the largest weight first within an id
    ids, w = ids[order], w[order]
    first = np.ones(len(ids), dtype=bool)
    first[1:] = ids[1:] != ids[:-1]
    return ids[first], w[first]


def pooled_sparse_vector(windows: Sequence[tuple[Sequence[int], Sequence[float], float]]) -> SparseVector:
    """A long text's sparse vector from its windows' (token ids, weights, share): the mean of the
    windows' sparse vectors weighted by their shares (their token counts, as for the text's
    dense vector). A token that one window of many holds weighs less than in that window alone,
    so a long document does not outscore a short one by holding more distinct tokens."""
    parts = [(*sparse_vector(ids, w), float(share)) for ids, w, share in windows]
    total = sum(share for _, _, share in parts)
    if not parts or total <= 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
    ids = np.concatenate([i for i, _, _ in parts])
    values = np.concatenate([w * (share / total) for _, w, share in parts]).astype(np.float64)
    unique, position = np.unique(ids, return_inverse=True)
    sums = np.zeros(len(unique), dtype=np.float64)
    np.add.at(sums, position, values)
    return unique.astype(np.int64), sums.astype(np.float32)


def _csr(rows: Sequence[SparseVector], columns: np.ndarray):
    """The rows as a scipy CSR matrix over `columns` (every key of `rows`, ascending)."""
    csr_matrix = require("scipy.sparse", "lexical (sparse) scoring", extra="embedding").csr_matrix

    indptr = np.cumsum([0] + [len(ids) for ids, _ in rows])
    keys = np.concatenate([ids for ids, _ in rows]) if rows else np.zeros(0, dtype=np.int64)
    values = np.concatenate([w for _, w in rows]).astype(np.float32) if rows else np.zeros(0, dtype=np.float32)
    return csr_matrix((values, np.searchsorted(columns, keys), indptr), shape=(len(rows), len(columns)))


def lexical_scores(queries: Sequence[SparseVector], documents: Sequence[SparseVector]) -> np.ndarray:
    """(n, m) lexical scores: the dot products of the queries' and the documents' sparse vectors
    (the weights of the keys each pair shares), as sparse matrix products over the keys they
    use, `_CHUNK_ROWS` queries at a time."""
    out = np.zeros((len(queries), len(documents)), dtype=np.float32)
    keys = [v[0] for v in (*queries, *documents) if len(v[0])]
    if not keys:
        return out
    columns = np.unique(np.concatenate(keys))
    docs_t = _csr(documents, columns).T.tocsr()
    for i in range(0, len(queries), _CHUNK_ROWS):
        out[i:i + _CHUNK_ROWS] = (_csr(queries[i:i + _CHUNK_ROWS], columns) @ docs_t).toarray()
    return out


def lexical_pair_scores(first: Sequence[SparseVector], second: Sequence[SparseVector]) -> np.ndarray:
    """(n,) lexical score of each pair (first[i], second[i])."""
    if len(first) != len(second):
        raise DataError(f"{len(first)} first texts but {len(second)} second texts")
    out = np.zeros(len(first), dtype=np.float32)
    for i, ((ia, wa), (ib, wb)) in enumerate(zip(first, second)):
        _, ka, kb = np.intersect1d(ia, ib, assume_unique=True, return_indices=True)
        out[i] = float(wa[ka] @ wb[kb])
    return out
