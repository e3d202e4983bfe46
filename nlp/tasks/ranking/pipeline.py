"""The reranking pipeline: how relevant each passage is to a query, best first.

    rr = nlp.pipeline("text-ranking", model="runs/rerank-titles")
    rr("北京的天气", ["北京今天晴", "上海下雨", "北京明天有雨"])
    # [{"index": 0, "score": 0.93}, {"index": 2, "score": 0.71}, {"index": 1, "score": 0.02}]
    rr("北京的天气", passages, top_k=2, return_text=True)   # adds "text"; the two best only
    rr(["q1", "q2"], [[...], [...]])                         # one ranking per query
    rr.score_pairs([("q", "p"), ...])                        # raw scores (logits), in input order

Each pair is one row ``[CLS] query [SEP] passage [SEP]``; the score is the model's relevance
logit, through a sigmoid unless `raw_scores=True` (the order is the same either way). A query
keeps at most `max_query_length` tokens (the model's `max_query_length` from its training
recipe, else 64). A passage longer than the room left is read in overlapping windows (`stride`
tokens shared, default a quarter of the room) and scores as its best window (MaxP: a long
document is as relevant as its most relevant part); `truncate=True` reads its first window only.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from nlp._common import DataError
from nlp.tasks.base_pipeline import Pipeline, as_batch, check_unicode
from nlp.tasks.ranking.collate import RankingCollator
from nlp.tasks.ranking.heads import ErnieForTextRanking
from nlp.tasks.ranking.preprocess import pair_windows

__all__ = ["TextRankingPipeline", "DEFAULT_MAX_QUERY_LENGTH", "sigmoid"]

DEFAULT_MAX_QUERY_LENGTH = 64  # tokens: queries are short; the passage gets the rest of max_length


def sigmoid(x: np.ndarray | float) -> Any:
    return 1.0 / (1.0 + np.exp(-np.asarray(x, dtype=np.float64)))


class TextRankingPipeline(Pipeline):
    """(query, passages) -> [{"index", "score"[, "text"]}, ...], best first."""

    task = "text-ranking"
    head_class = ErnieForTextRanking
    on_tokenless = "error"  # a blank passage's score would be the model's for the query alone

    def __init__(self, *args: Any, max_query_length: int | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        given = max_query_length or self.config.extra.get("max_query_length") or DEFAULT_MAX_QUERY_LENGTH
        self.max_query_length = min(int(given), max(1, self.max_length - 11))

    def _make_collator(self, multiple: int | None) -> Any:
        return RankingCollator(pad_token_id=self.tokenizer.pad_token_id, pad_to_multiple_of=multiple)

    def _row(self, out: dict[str, np.ndarray], j: int, length: int) -> Any:
        return float(np.asarray(out["logits"][j]).reshape(-1)[0])

    def score_pairs(self, pairs: Sequence[tuple[str, str]], *, truncate: bool = False,
                    stride: int | None = None) -> list[float]:
        """The raw score (logit) of each (query, passage) pair, in order; a long passage's is its
        best window's."""
        pairs = [tuple(p) for p in pairs]
        if any(len(p) != 2 for p in pairs):
            raise DataError("score_pairs takes (query, passage) pairs")
        queries, passages = [q for q, _ in pairs], [p for _, p in pairs]
        for texts, what in ((queries, "query"), (passages, "passage")):
            as_batch(texts, what)
            check_unicode(texts, what, False)
            self.check_tokens(texts, what, False)
        rows, owners = pair_windows(self.tokenizer, queries, passages, max_length=self.max_length,
                                    max_query_length=self.max_query_length, stride=stride, truncate=truncate)
        best = np.full(len(pairs), -np.inf)
        for owner, score in zip(owners, self._forward(rows)):
            best[owner] = max(best[owner], score)
        return best.tolist()

    def __call__(self, query: str | Sequence[str], passages: Sequence[str] | Sequence[Sequence[str]], *,
                 top_k: int | None = None, return_text: bool = False, raw_scores: bool = False,
                 truncate: bool = False, stride: int | None = None) -> list[dict] | list[list[dict]]:
        """One ranking (a list of {"index", "score"[, "text"]}, best first) per query: for one
        query a list of passages, for a list of queries a list of passage lists. `top_k`: keep the
        best k. `raw_scores`: the logits instead of their sigmoid."""
        queries, single = as_batch(query, "query")
        if isinstance(passages, str):
            raise TypeError("passages must be a list of str (one query) or a list of lists (several queries)")
        lists = [list(passages)] if single else [list(p) for p in passages]
        if len(lists) != len(queries):
            raise DataError(f"{len(queries)} queries but {len(lists)} lists of passages; give one list per query")
        for i, group in enumerate(lists):
            as_batch(group, "passage" if single else f"passage of query {i}")
        if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1):
            raise DataError(f"top_k must be a positive int or None, got {top_k!r}")
        pairs = [(q, p) for q, group in zip(queries, lists) for p in group]
        scores = self.score_pairs(pairs, truncate=truncate, stride=stride) if pairs else []
        results, at = [], 0
        for group in lists:
            raw = np.asarray(scores[at:at + len(group)], dtype=np.float64)
            at += len(group)
            order = np.argsort(-raw, kind="stable")[:top_k]
            shown = raw if raw_scores else sigmoid(raw)
            results.append([{"index": int(i), "score": float(shown[i]), **({"text": group[i]} if return_text else {})}
                            for i in order])
        return results[0] if single else results
