"""Built-in reranking data: the retrieval benchmarks' pairs as query groups with mined negatives.

``inews-titles-ranking`` and ``xinhua-idioms-ranking`` are ``inews-titles`` and
``xinhua-idioms`` (nlp/tasks/embedding/builtin.py: same records, same splits) with, for each
query, the 7 passages of its own split that BM25 over character 1-2-grams ranks highest among
those that are not its positive (mining.py; deterministic). Each split's negatives come from that
split's documents only, so no dev or test document enters a training group; the dev and test
groups are for scoring the reranker inside its group (MRR, recall@1, nDCG@10), while the
benchmarks rank a whole split's documents (benchmarks/retrieval.py --rerank).
"""

from __future__ import annotations

from pathlib import Path

from nlp._extras import LazyModule
from nlp.tasks.embedding.builtin import build_inews_titles, build_xinhua_idioms
from nlp.tasks.ranking.mining import mine_negatives

datasets = LazyModule("datasets", "reading and preparing datasets")  # the train extra

__all__ = ["builtin_datasets", "NEGATIVES"]

NEGATIVES = 7  # per query: groups of 8 passages, a listwise softmax over each


def _grouped(build):
    def builder(paths: list[Path]):
        from nlp.tasks.ranking.data import FEATURES

        pairs, info = build(paths)
        out = datasets.DatasetDict()
        for split, ds in pairs.items():
            queries, positives = [t[0] for t in ds["texts"]], [t[1] for t in ds["texts"]]
            negatives = mine_negatives(queries, positives, method="bm25", count=NEGATIVES)
            out[split] = datasets.Dataset.from_dict({"query": queries, "positive": positives, "negatives": negatives},
                                                    features=FEATURES())
        info = {**info, "negatives": f"{NEGATIVES} per query, BM25 (character 1-2-grams) over the split's documents"}
        return out, info
    return builder


def builtin_datasets() -> tuple:
    from nlp.tasks.datasets.builtin import BuiltinDataset
    from nlp.tasks.embedding.builtin import builtin_datasets as retrieval

    by_name = {d.name: d for d in retrieval()}
    out = []
    for name, build in (("inews-titles", build_inews_titles), ("xinhua-idioms", build_xinhua_idioms)):
        base = by_name[name]
        out.append(BuiltinDataset(
            f"{name}-ranking", "text-ranking",
            f"{base.description} As query groups for reranking: each query with its document and the {NEGATIVES} "
            "documents of the same split that BM25 ranks highest among the others (hard negatives); scored by "
            "MRR, recall@1 and nDCG@10 within each group.",
            (), base.source, base.files, _grouped(build), version=f"{base.version}.1"))
    return tuple(out)
