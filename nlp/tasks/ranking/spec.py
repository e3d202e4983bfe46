"""The text-ranking (reranking) task: a cross-encoder scores (query, passage) pairs.

Training data are query groups, `{"query", "positive", "negatives": [...]}` (data.py), or the
(query, positive[, negative]) pairs of the retrieval datasets (`data.dataset: inews-titles` or
`xinhua-idioms`, the embedding task's files), whose negatives `task.negatives` mines: "bm25",
"embedding" (with `task.mining_model`, a sentence-embedding model directory) or
"bm25+embedding", each split from its own documents only (mining.py; deterministic), so no dev
or test document enters a training group. The recipe's `task.ranking_loss` picks listwise (softmax over
each group) or pointwise (BCE per pair) training, `task.num_negatives` how many negatives a
group holds. Evaluation ranks each positive among its group (MRR, recall@1, recall@10, nDCG@10);
benchmarks/retrieval.py ranks a whole split's documents instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator, Mapping, Sequence

import numpy as np

from nlp._common import DataError
from nlp._extras import LazyModule
from nlp._settings import Problem
from nlp.tasks.options import CallOption
from nlp.tasks.ranking.collate import RankingCollator
from nlp.tasks.ranking.data import check_group, read_ranking
from nlp.tasks.ranking.heads import DEFAULT_LOSS, ErnieForTextRanking
from nlp.tasks.ranking.losses import RANKING_LOSSES
from nlp.tasks.ranking.mining import METHODS, mine_negatives
from nlp.tasks.ranking.metrics import group_metrics
from nlp.tasks.ranking.pipeline import DEFAULT_MAX_QUERY_LENGTH, TextRankingPipeline
from nlp.tasks.ranking.preprocess import pair_rows
from nlp.tasks.ranking.serving import RankingPredictAdapter, RerankAdapter
from nlp.tasks.spec import TaskSettings, TaskSpec

datasets = LazyModule("datasets", "reading and preparing datasets")  # the train extra

__all__ = ["TextRankingSpec", "RankingSettings", "TEXT_RANKING"]

# the passage every check text is paired with in an export's check batch
_CHECK_PASSAGE = "这家餐厅的服务非常好，菜也很新鲜，价格合理，下次还会再来。"


@dataclass
class RankingSettings(TaskSettings):
    name: str = "text-ranking"
    # "listwise": softmax cross-entropy over each query group (positive vs its negatives; what
    # rerankers such as bge-reranker train with); "pointwise": BCE per (query, passage) pair
    ranking_loss: str = DEFAULT_LOSS
    # negatives per group (each record's first ones): more = a harder, costlier step; records
    # with fewer are refused, naming the record
    num_negatives: int = 7
    # the query's share of a row: a longer query is cut, so that the passage keeps the rest
    max_query_length: int = DEFAULT_MAX_QUERY_LENGTH
    # where a group's negatives come from: "data" (each record's own), or mined from the
    # split's documents: "bm25", "embedding" (needs mining_model), "bm25+embedding", "random",
    # "bm25+random" / "embedding+random" (hard and easy ones interleaved: mining.py says why
    # hard ones alone mislead)
    negatives: str = "data"
    mining_model: str | None = None  # a sentence-embedding model directory, for embedding mining

    def problems(self) -> Iterator[Problem]:
        if self.ranking_loss not in RANKING_LOSSES:
            yield Problem("ranking_loss", f"ranking_loss must be one of {', '.join(RANKING_LOSSES)}, "
                                          f"got {self.ranking_loss!r}")
        if isinstance(self.num_negatives, bool) or not isinstance(self.num_negatives, int) or self.num_negatives < 1:
            yield Problem("num_negatives", f"num_negatives must be an int >= 1, got {self.num_negatives!r}")
        if isinstance(self.max_query_length, bool) or not isinstance(self.max_query_length, int) \
                or self.max_query_length < 1:
            yield Problem("max_query_length", f"max_query_length must be an int >= 1, got {self.max_query_length!r}")
        if self.negatives not in ("data", *METHODS):
            yield Problem("negatives", f"negatives must be one of data, {', '.join(METHODS)}; got {self.negatives!r}")
        if "embedding" in str(self.negatives) and not self.mining_model:
            yield Problem("mining_model", f"negatives: {self.negatives} needs mining_model, a sentence-embedding "
                                          "model directory")


class TextRankingSpec(TaskSpec):
    name = "text-ranking"
    aliases = ("rerank", "reranker", "reranking", "cross-encoder", "passage-ranking")
    extra = "embedding"
    requires = {"train": ("scipy",)}  # BM25 mining of the built-in groups
    head = ErnieForTextRanking
    pipeline_class = TextRankingPipeline
    architecture_suffix = "ForTextRanking"
    label_column = "positive"
    has_label_set = False
    packable = False  # a group's pairs are scored side by side
    input_fields = ("query", "passages")
    result_field = "ranking"
    settings = RankingSettings
    serving = RankingPredictAdapter()
    export_outputs = {"logits": ("batch", "num_labels")}
    distill_losses = {"logits": "mse"}  # a relevance score, regressed
    eval_keeps = "scores"
    export_agreement = "order"  # the argmax of one score is always 0
    call_options = (
        CallOption("top_k", int, None, "how many passages to return per query, best first (null: all)",
                   minimum=1, nullable=True),
        CallOption("return_text", bool, False, "add each passage's text to its entry"),
        CallOption("raw_scores", bool, False, "the relevance logits instead of their sigmoid"),
        CallOption("truncate", bool, False, "score each passage's first window only (default: its best window)"),
    )
    reader = staticmethod(read_ranking)
    preprocess = staticmethod(pair_rows)
    metric = staticmethod(group_metrics)

    def read(self, path: str, data: Any, *, need_labels: bool = False) -> datasets.Dataset:
        return read_ranking(path, **dict(data.reader))

    def has_labels(self, ds: datasets.Dataset) -> bool:
        if "texts" in ds.column_names:  # a retrieval dataset: (query, positive[, negatives])
            return len(ds) == 0 or len(ds[0]["texts"]) >= 2
        return "positive" in ds.column_names

    def trains_on(self, ds: datasets.Dataset) -> bool:
        return self.has_labels(ds)

    def summarize(self, ds: datasets.Dataset) -> list[str]:
        groups = _groups(ds[:])
        lines = [f"{len(groups[0])} query groups"]
        if groups[0]:
            counts = [len(n) for n in groups[2]]
            lines.append(f"  negatives per query: {min(counts)} .. {max(counts)}")
            lines.append(f"  characters per passage: {np.mean([len(p) for p in groups[1]]):.1f} on average")
        return lines

    def training_texts(self, ds: datasets.Dataset) -> list[str]:
        queries, positives, negatives = _groups(ds[:])
        return [*queries, *positives, *(n for row in negatives for n in row)]

    def head_config(self, label_names: list[str] | None, train: Any = None, settings: Any = None) -> dict[str, Any]:
        s = self.task_settings(settings)
        return {"num_labels": 1, "ranking_loss": s.ranking_loss, "max_query_length": s.max_query_length}

    def check_head(self, config: Any, label_names: list[str] | None) -> None:
        return None  # any one-score head (a foreign reranker) fits

    def featurize(self, columns: Mapping[str, Sequence[Any]], tokenizer: Any, data: Any,
                  label_names: list[str] | None, *, settings: Any = None) -> dict[str, list]:
        s = self.task_settings(settings)
        k = s.num_negatives
        queries_in, positives, negatives = _groups(columns)
        if s.negatives != "data":
            model = None
            if "embedding" in s.negatives:
                from nlp.tasks.embedding.pipeline import SentenceSimilarityPipeline

                model = SentenceSimilarityPipeline(s.mining_model, max_length=data.max_length, batch_size=32)
            negatives = mine_negatives(queries_in, positives, method=s.negatives, count=k, model=model)
        short = [i for i, negs in enumerate(negatives) if len(negs) < k]
        if short:
            i = short[0]
            raise DataError(f"record {i} has {len(negatives[i])} negatives; task.num_negatives is {k} "
                            f"({len(short)} records have fewer): lower task.num_negatives, mine negatives "
                            "(task.negatives: bm25), or add negatives to the records")
        queries, passages = [], []
        for q, p, negs in zip(queries_in, positives, negatives):
            queries += [q] * (k + 1)
            passages += [p, *negs[:k]]
        enc = pair_rows(tokenizer, queries, passages, max_length=data.max_length, max_query_length=s.max_query_length)
        g = k + 1
        out = {key: [rows[i * g:(i + 1) * g] for i in range(len(queries_in))] for key, rows in enc.items()}
        out["labels"] = [[1.0] + [0.0] * k for _ in queries_in]
        return out

    def collator(self, tokenizer: Any, *, pad_to_multiple_of: int | None = None) -> RankingCollator:
        return RankingCollator(pad_token_id=tokenizer.pad_token_id, pad_to_multiple_of=pad_to_multiple_of)

    def loss_units(self, model: Any):
        return _groups_in

    def score(self, predictions: Sequence[Any], label_ids: Sequence[Any] | None, *, label_names: list[str] | None,
              examples: Any, features: Any, data: Any, settings: Any = None) -> dict[str, float]:
        scores = [np.asarray(p, dtype=np.float64).reshape(-1) for p in predictions]
        labels = [np.asarray(y, dtype=np.float64).reshape(-1) for y in (label_ids or [])]
        return group_metrics(scores, labels)

    def parse_record(self, record: Any, where: str) -> dict[str, Any]:
        ok = (isinstance(record, dict) and isinstance(record.get("query"), str)
              and isinstance(record.get("passages"), list) and bool(record["passages"])
              and all(isinstance(p, str) for p in record["passages"]))
        if not ok:
            raise DataError(f"{where}: expected an object {{\"query\": str, \"passages\": [str, ...]}}")
        return record

    def predict(self, pipe: Any, records: list[dict[str, Any]], **options: Any) -> list[dict[str, Any]]:
        rankings = pipe([r["query"] for r in records], [r["passages"] for r in records], **options)
        return [{"ranking": r} for r in rankings]

    def empty_prediction(self) -> dict[str, Any]:
        return {"ranking": []}

    def check_batch(self, tokenizer: Any, max_length: int, texts: Sequence[str]) -> dict[str, np.ndarray]:
        enc = pair_rows(tokenizer, list(texts), [_CHECK_PASSAGE] * len(texts), max_length=max_length,
                        max_query_length=max(1, min(DEFAULT_MAX_QUERY_LENGTH, max_length - 11)))
        batch = RankingCollator(pad_token_id=tokenizer.pad_token_id)([{k: enc[k][i] for k in self.export_inputs}
                                                                       for i in range(len(texts))])
        return {k: batch[k].numpy() for k in self.export_inputs}

    def serving_routes(self) -> dict[str, Any]:
        return {"/predict": self.serving, "/rerank": RerankAdapter()}


def _groups_in(batch: Any) -> int:
    return len(batch["input_ids"])


def _groups(columns: Mapping[str, Sequence[Any]]) -> tuple[list[str], list[str], list[list[str]]]:
    """(queries, positives, negatives) of a split's columns: query groups (data.py), or the
    retrieval datasets' `texts` rows (query, positive, then any negatives)."""
    if "texts" in columns:
        rows = columns["texts"]
        bad = next((i for i, t in enumerate(rows) if len(t) < 2), None)
        if bad is not None:
            raise DataError(f"record {bad} has {len(rows[bad])} texts; a ranking record needs a query and its "
                            "positive (and negatives)")
        return [t[0] for t in rows], [t[1] for t in rows], [list(t[2:]) for t in rows]
    return list(columns["query"]), list(columns["positive"]), [list(n) for n in columns["negatives"]]

TEXT_RANKING = TextRankingSpec()
