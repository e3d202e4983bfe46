"""Hard negatives for reranker training: for each (query, positive), the passages of the same
corpus that a first-stage retriever ranks highest but that are not the positive.

    negs = mine_negatives(queries, positives, method="bm25", count=7)                 # lexical
    negs = mine_negatives(queries, positives, method="embedding", count=7, model=sim)  # dense
    python -m nlp.tasks.ranking.mining --data inews-titles --method bm25+embedding \\
        --model runs/e5-small-zh --count 7 --out train-groups.jsonl

- "bm25": Okapi BM25 (k1 1.5, b 0.75) over character 1- and 2-grams, the lexical baseline of
  the retrieval benchmarks; "embedding": the cosine of a sentence-similarity pipeline's vectors
  (its query / passage prompts applied, passages cut to their first window);
  "bm25+embedding": the two interleaved (bm25 first), duplicates skipped; "random": passages drawn
  uniformly; "bm25+random" / "embedding+random": BM25's or the embedding model's picks and random
  ones interleaved (the latter: the candidates a reranker of that model's search will meet).
  BM25's picks are not a random sample of passages (they share the most characters with the
  query), so a reranker trained against them alone can learn what sets them apart instead of
  matching the query, and rank well inside its training groups while at chance among passages
  it has not met (docs/ranking.md). Random negatives take that shortcut away.
- The corpus is the positives themselves unless `corpus` is given (the passages a reranker will
  meet at inference: the documents of the same split). The command mines the train split only
  and refuses the test split: negatives of scored data would leak it into training.
- Deterministic: ties in score go to the lower corpus index; random draws are seeded by the
  query's position and `seed`, so the same call mines the same passages. `skip` drops the
  first passages after the positive (likely unlabelled positives in a corpus with duplicates).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np

from nlp._common import ConfigError, DataError, atomic_write, did_you_mean
from nlp._extras import require

__all__ = ["BM25", "mine_negatives", "METHODS", "main"]

METHODS = ("bm25", "embedding", "bm25+embedding", "random", "bm25+random", "embedding+random")
_CHUNK = 512  # queries scored at a time: a (chunk, corpus) dense block


def _grams(text: str) -> list[str]:
    chars = [c for c in text if not c.isspace()]
    return chars + [a + b for a, b in zip(chars, chars[1:])]


class BM25:
    """Okapi BM25 over character 1- and 2-grams of a corpus (scipy sparse matrices)."""

    def __init__(self, corpus: Sequence[str], k1: float = 1.5, b: float = 0.75) -> None:
        sp = require("scipy.sparse", "BM25 hard-negative mining", extra="embedding")
        self.vocab: dict[str, int] = {}
        indptr, indices, data = [0], [], []
        for text in corpus:
            counts: dict[int, int] = {}
            for g in _grams(text):
                j = self.vocab.setdefault(g, len(self.vocab))
                counts[j] = counts.get(j, 0) + 1
            indices.extend(counts)
            data.extend(counts.values())
            indptr.append(len(indices))
        tf = sp.csr_matrix((np.asarray(data, np.float64), np.asarray(indices, np.int64), np.asarray(indptr)),
                           shape=(len(corpus), max(1, len(self.vocab))))
        n = tf.shape[0]
        df = np.bincount(tf.indices, minlength=tf.shape[1])
        self.idf = np.log(1 + (n - df + 0.5) / (df + 0.5))
        length = np.asarray(tf.sum(axis=1)).ravel()
        norm = k1 * (1 - b + b * length / max(float(length.mean()), 1e-9)) if n else length
        rows = np.repeat(np.arange(n), np.diff(tf.indptr))
        tf.data = self.idf[tf.indices] * tf.data * (k1 + 1) / (tf.data + norm[rows])
        self._weights = tf.T.tocsr()  # (V, D)
        self._sp = sp

    def scores(self, queries: Sequence[str]) -> np.ndarray:
        """(Q, D) BM25 scores (a query's repeated n-grams count each time)."""
        rows, cols = [], []
        for i, q in enumerate(queries):
            for g in _grams(q):
                j = self.vocab.get(g)
                if j is not None:
                    rows.append(i)
                    cols.append(j)
        q = self._sp.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(len(queries), self._weights.shape[0]))
        return np.asarray((q @ self._weights).todense())


def _top(scores: np.ndarray, k: int) -> np.ndarray:
    """Per row, the column indices of the k highest scores, best first, ties to the lower index."""
    k = min(k, scores.shape[1])
    kth = -np.partition(-scores, k - 1, axis=1)[:, k - 1]  # each row's k-th largest score
    out = np.empty((len(scores), k), dtype=np.int64)
    for i, (row, v) in enumerate(zip(scores, kth)):
        cand = np.flatnonzero(row >= v)  # the top k and whatever ties the k-th
        out[i] = cand[np.lexsort((cand, -row[cand]))][:k]
    return out


def _bm25_ranked(queries: Sequence[str], corpus: Sequence[str], depth: int) -> list[np.ndarray]:
    index = BM25(corpus)
    out: list[np.ndarray] = []
    for i in range(0, len(queries), _CHUNK):
        out.extend(_top(index.scores(queries[i:i + _CHUNK]), depth))
    return out


def _embedding_ranked(model: Any, queries: Sequence[str], corpus: Sequence[str], depth: int) -> list[np.ndarray]:
    if model is None or not hasattr(model, "index") or not hasattr(model, "search"):
        raise ConfigError("method='embedding' needs model=, a sentence-similarity pipeline "
                          "(nlp.pipeline('sentence-similarity', model=DIR))")
    index = model.index(list(corpus), truncate=True)
    hits = model.search(list(queries), index, top_k=min(depth, len(corpus)), truncate=True)
    return [np.asarray([h["corpus_id"] for h in row], dtype=np.int64) for row in hits]


def _random_ranked(n_queries: int, corpus_size: int, depth: int, seed: int) -> list[np.ndarray]:
    depth = min(depth, corpus_size)
    return [np.random.default_rng((seed, i)).choice(corpus_size, depth, replace=False) for i in range(n_queries)]


def mine_negatives(queries: Sequence[str], positives: Sequence[str], *, method: str = "bm25", count: int = 7,
                   corpus: Sequence[str] | None = None, model: Any = None, skip: int = 0,
                   seed: int = 0) -> list[list[str]]:
    """Per query, `count` passages of `corpus` (default: the positives) ranked highest by `method`
    that are not its positive (nor equal to it), best first. Fewer only where the corpus has fewer."""
    if method not in METHODS:
        raise ConfigError(f"method={method!r}; valid: {', '.join(METHODS)}.{did_you_mean(str(method), METHODS)}")
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise ConfigError(f"count must be a positive int, got {count!r}")
    if len(queries) != len(positives):
        raise DataError(f"{len(queries)} queries for {len(positives)} positives; give one positive per query")
    corpus = list(positives if corpus is None else corpus)
    depth = count + skip + 1  # room for the positive itself
    parts = method.split("+")  # interleaved in this order: bm25, embedding, random
    lists: list[list[np.ndarray]] = []
    if "bm25" in parts:
        lists.append(_bm25_ranked(list(queries), corpus, depth))
    if "embedding" in parts:
        lists.append(_embedding_ranked(model, list(queries), corpus, depth))
    if "random" in parts:
        lists.append(_random_ranked(len(queries), len(corpus), depth, seed))
    out = []
    for i, positive in enumerate(positives):
        per_method = [[corpus[j] for j in ranked[i] if corpus[j] != positive][skip:] for ranked in lists]
        chosen: list[str] = []
        for texts in zip(*per_method) if len(per_method) > 1 else ([t] for t in per_method[0]):
            for t in texts:
                if t not in chosen and len(chosen) < count:
                    chosen.append(t)
        out.append(chosen)
    return out


def main(argv: list[str] | None = None) -> int:
    """Mine a split of a built-in retrieval dataset into a JSON-lines file of query groups."""
    ap = argparse.ArgumentParser(prog="python -m nlp.tasks.ranking.mining", description=main.__doc__)
    ap.add_argument("--data", required=True, help="a built-in retrieval dataset (inews-titles, xinhua-idioms)")
    ap.add_argument("--split", default="train", help="train or dev; the test split is refused")
    ap.add_argument("--method", default="bm25", choices=METHODS)
    ap.add_argument("--model", help="a sentence-similarity model directory (method embedding)")
    ap.add_argument("--count", type=int, default=7, help="negatives per query")
    ap.add_argument("--skip", type=int, default=0, help="passages after the positive to pass over")
    ap.add_argument("--max-length", type=int, default=256, help="the embedding model's tokens per passage")
    ap.add_argument("--out", required=True, help="the JSON-lines file to write")
    args = ap.parse_args(argv)
    if args.split == "test":
        raise SystemExit("--split test: the test split is for scoring only; mine the train (or dev) split")
    from nlp.tasks.datasets import load
    from nlp.tasks.embedding.pipeline import SentenceSimilarityPipeline

    pairs = load(args.data)[args.split]["texts"]
    queries, positives = [p[0] for p in pairs], [p[1] for p in pairs]
    model = None
    if "embedding" in args.method:
        if not args.model:
            raise SystemExit(f"--method {args.method} needs --model DIR (a sentence-embedding model directory)")
        model = SentenceSimilarityPipeline(args.model, max_length=args.max_length, batch_size=32)
    negatives = mine_negatives(queries, positives, method=args.method, count=args.count, model=model, skip=args.skip)
    with atomic_write(args.out, "w", encoding="utf-8") as f:
        for q, p, n in zip(queries, positives, negatives):
            f.write(json.dumps({"query": q, "positive": p, "negatives": n}, ensure_ascii=False) + "\n")
    print(f"wrote {len(queries)} query groups of {args.count} {args.method} negatives to {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
