"""benchmarks/retrieval.py's retrieve-then-rerank rows: which first stage the reranker reorders,
and that the reranked documents come first in the reranker's own order, the rest after them in
the first stage's. A tiny random reranker; no dataset is read."""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pytest
import torch

import nlp
from nlp.tasks.embedding.metrics import rank_metrics
from nlp.tasks.ranking import ErnieForTextRanking

from _benchmark_module import load_benchmark
from tasks._task_fixtures import save_as_fine_tuned

ASSET = Path(nlp.__file__).parent / "assets" / "ernie-tiny-zh"
QUERIES = ["北京的天气", "早茶", "大学招生"]
DOCUMENTS = ["北京今天晴，气温二十度。", "广州的早茶很有名。", "南京大学今年招生一千人。", "上海明天有大雨。"]

retrieval = load_benchmark("retrieval.py", "bench_retrieval")


@pytest.fixture(scope="module")
def reranker(tmp_path_factory) -> Path:
    torch.manual_seed(0)
    out = tmp_path_factory.mktemp("bench-retrieval") / "reranker"
    return save_as_fine_tuned(ErnieForTextRanking.from_pretrained(ASSET), out, head_std=0.5)


def _args(reranker: Path, first_stage: str, top_k: int = 2, weights: tuple = ()) -> argparse.Namespace:
    return argparse.Namespace(rerank=str(reranker), first_stage=first_stage, rerank_top_k=top_k,
                              rerank_max_length=None, rerank_windows="first", rerank_weights=weights)


def test_the_search_first_stage_is_the_models_own_search_and_its_top_k_is_reordered_by_the_reranker(reranker):
    gold = [0, 1, 2]
    searched = [[0.9, 0.1, 0.5, 0.2], [0.3, 0.8, 0.1, 0.7], [0.2, 0.4, 0.6, 0.1]]  # the model's search
    dense = [[0.0, 1.0, 0.0, 0.0]] * 3  # a different ranking: must not be the one reordered
    bm25 = np.zeros((3, 4))
    rows = retrieval._reranked_rows(_args(reranker, "search"), "emb", QUERIES, DOCUMENTS, gold,
                                    ("emb dense (first window)", dense), ("emb search (hybrid)", searched), bm25)
    (stage, first), (reranked_name, reranked), (fused_name, _) = rows
    assert stage == "emb search (hybrid)" and first == rank_metrics(searched, gold)
    assert reranked_name == "emb search (hybrid) top 2 reranked by reranker" and "RRF" in fused_name

    # the same figures by hand: each query's 2 best by the search, in the reranker's order, then the rest
    rr = nlp.pipeline("text-ranking", model=str(reranker))
    expected = []
    for q, row in zip(QUERIES, searched):
        order = list(np.argsort(-np.asarray(row), kind="stable"))
        top = order[:2]
        by_reranker = [top[r["index"]] for r in rr(q, [DOCUMENTS[j] for j in top])]
        scores = np.zeros(4)
        for place, j in enumerate(by_reranker + order[2:]):
            scores[j] = 4 - place
        expected.append(scores)
    assert reranked == pytest.approx(rank_metrics(expected, gold))


def test_a_weighted_row_orders_the_top_k_by_fused_scores_as_search_does(reranker):
    gold = [0, 1, 2]
    searched = [[0.9, 0.1, 0.5, 0.2], [0.3, 0.8, 0.1, 0.7], [0.2, 0.4, 0.6, 0.1]]
    rows = retrieval._reranked_rows(_args(reranker, "search", top_k=3, weights=(0.5, 2.0)), "emb", QUERIES,
                                    DOCUMENTS, gold, ("emb dense", [[0.0] * 4] * 3), ("emb search", searched),
                                    np.zeros((3, 4)))
    assert [name for name, _ in rows[3:]] == ["emb search top 3, z(first) + 0.5 z(reranker)",
                                              "emb search top 3, z(first) + 2 z(reranker)"]
    assert rows[3][1] not in (rows[0][1], rows[1][1])  # at 0.5 neither stage's order alone: the case tells
    rr = nlp.pipeline("text-ranking", model=str(reranker))
    for weight, (_, figures) in zip((0.5, 2.0), rows[3:]):
        expected = []
        for q, row in zip(QUERIES, searched):
            order = list(np.argsort(-np.asarray(row), kind="stable"))
            top, rest = order[:3], order[3:]
            logits = rr.score_pairs([(q, DOCUMENTS[j]) for j in top], truncate=True)
            z = lambda a: (np.asarray(a) - np.mean(a)) / np.std(a)
            fused = z([row[j] for j in top]) + weight * z(logits)
            scores = np.zeros(4)
            for place, j in enumerate([top[i] for i in np.argsort(-fused, kind="stable")] + rest):
                scores[j] = 4 - place
            expected.append(scores)
        assert figures == pytest.approx(rank_metrics(expected, gold))


def test_rerank_weights_must_be_numbers_at_least_zero(capsys):
    assert retrieval._weights("0.3,1") == (0.3, 1.0)
    for bad in ("-1", "a", "0.5,,1"):
        with pytest.raises(SystemExit):
            retrieval.main(["e5-small-zh-embedding", "--rerank-weights", bad])
        assert "give comma-separated numbers >= 0" in capsys.readouterr().err


def test_the_dense_first_stage_is_the_first_window_cosine(reranker):
    dense = [[0.9, 0.1, 0.5, 0.2], [0.3, 0.8, 0.1, 0.7], [0.6, 0.4, 0.2, 0.1]]
    rows = retrieval._reranked_rows(_args(reranker, "dense", top_k=4), "emb", QUERIES, DOCUMENTS, [0, 1, 2],
                                    ("emb dense (first window)", dense), ("emb search", [[0.0] * 4] * 3),
                                    np.zeros((3, 4)))
    assert rows[0] == ("emb dense (first window)", rank_metrics(dense, [0, 1, 2]))


def test_search_as_first_stage_needs_every_window(capsys):
    with pytest.raises(SystemExit):
        retrieval.main(["e5-small-zh-embedding", "--windows", "first", "--rerank", "RERANKER"])
    assert "--first-stage search reads every window" in capsys.readouterr().err
