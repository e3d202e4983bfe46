"""The text-ranking task: the reader and its refusals, the losses, the group metrics, hard-negative
mining, the pipeline's ordering and windows, sim.search with a reranker, and exports (fp32 and
int8) against PyTorch. Tiny random models throughout."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import nlp
from nlp._common import ConfigError, DataError
from nlp.tasks import get_task
from nlp.tasks.ranking import BM25, ErnieForTextRanking, TextRankingPipeline, mine_negatives
from nlp.tasks.ranking.data import read_ranking
from nlp.tasks.ranking.losses import listwise_loss, pointwise_loss
from nlp.tasks.ranking.metrics import group_metrics
from nlp.tasks.ranking.mining import main as mining_main
from nlp.tasks.ranking.preprocess import pair_windows
from nlp.tokenizer import load_tokenizer

from tasks._task_fixtures import save_as_fine_tuned

ASSET = Path(nlp.__file__).parent / "assets" / "ernie-tiny-zh"
CORPUS = ["北京今天晴，气温二十度。", "上海明天有大雨，出门带伞。", "北京明天多云转阴。", "广州的早茶很有名。",
          "南京大学今年招生一千人。", "北京大学的图书馆很大。"]


@pytest.fixture(scope="module")
def reranker(tmp_path_factory) -> Path:
    """ernie-tiny-zh with a seeded random reranking head, as a model directory."""
    torch.manual_seed(0)
    out = tmp_path_factory.mktemp("ranking") / "reranker"
    return save_as_fine_tuned(ErnieForTextRanking.from_pretrained(ASSET), out, head_std=0.5)


def _jsonl(path: Path, rows: list) -> Path:
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r, ensure_ascii=False) for r in rows) + "\n",
                    encoding="utf-8")
    return path


# ------------------------------------------------------------------ reader

def test_reader_reads_groups_and_skips_only_blank_queries(tmp_path):
    path = _jsonl(tmp_path / "g.jsonl", [{"query": "北京天气", "positive": CORPUS[0], "negatives": CORPUS[1:3]},
                                         {"query": "  ", "positive": CORPUS[0], "negatives": [CORPUS[1]]},
                                         {"query": "早茶", "positive": CORPUS[3]}])
    ds, stats = read_ranking(path, return_stats=True)
    assert ds["query"] == ["北京天气", "早茶"] and ds["negatives"] == [CORPUS[1:3], []]
    assert stats.kept == 2 and stats.skipped["records with a blank query"] == 1
    renamed = _jsonl(tmp_path / "r.jsonl", [{"q": "北京天气", "pos": CORPUS[0], "neg": [CORPUS[1]]}])
    ds = read_ranking(renamed, query_column="q", positive_column="pos", negatives_column="neg")
    assert ds[0] == {"query": "北京天气", "positive": CORPUS[0], "negatives": [CORPUS[1]]}


@pytest.mark.parametrize("record, match", [
    ({"query": "q"}, r"g\.jsonl:2: 'positive' is missing"),
    ({"query": "q", "positive": 3}, r"g\.jsonl:2: 'positive' is a int"),
    ({"query": "q", "positive": " "}, r"g\.jsonl:2: 'positive' is blank"),
    ({"query": "q", "positive": "p", "negatives": "n"}, r"g\.jsonl:2: 'negatives' is 'n'"),
    ({"query": "q", "positive": "p", "negatives": ["n", 5]}, r"g\.jsonl:2: negatives\[1\]: 'negatives' is a int"),
    ({"query": "q", "positive": "p", "negatives": ["p"]}, r"g\.jsonl:2: negatives\[0\] is the positive itself"),
    (["q", "p"], r"g\.jsonl:2: expected an object"),
    ("{not json", r"g\.jsonl:2: malformed JSON"),
])
def test_reader_refuses_bad_records_naming_file_line_and_field(tmp_path, record, match):
    path = _jsonl(tmp_path / "g.jsonl", [{"query": "q", "positive": "p", "negatives": ["n"]}, record])
    with pytest.raises(DataError, match=match):
        read_ranking(path)


# ------------------------------------------------------------------ losses and metrics

def test_listwise_loss_is_cross_entropy_over_the_group_and_pointwise_is_bce():
    torch.manual_seed(0)
    scores = torch.randn(3, 4)
    labels = torch.tensor([[1.0, 0, 0, 0]] * 3)
    assert torch.allclose(listwise_loss(scores, labels), F.cross_entropy(scores, torch.zeros(3, dtype=torch.long)))
    graded = torch.tensor([[1.0, 1.0, 0, 0]] * 3)  # two relevant: half the target each
    expected = -(0.5 * F.log_softmax(scores, -1)[:, :2]).sum(-1).mean()
    assert torch.allclose(listwise_loss(scores, graded), expected)
    assert torch.allclose(pointwise_loss(scores, labels), F.binary_cross_entropy_with_logits(scores, labels))
    with pytest.raises(DataError, match="shape"):
        listwise_loss(scores, labels[:, :2])
    with pytest.raises(DataError, match="two or more passages"):
        listwise_loss(scores[:, :1], labels[:, :1])
    with pytest.raises(DataError, match="no relevant passage"):
        listwise_loss(scores, torch.zeros(3, 4))


def test_the_head_trains_on_groups_with_the_configured_loss():
    from tasks._task_fixtures import tiny_config

    for loss in ("listwise", "pointwise"):
        torch.manual_seed(0)
        model = ErnieForTextRanking(tiny_config(40, ranking_loss=loss))
        ids = torch.randint(5, 40, (2, 3, 7))
        labels = torch.tensor([[1.0, 0.0, 0.0]] * 2)
        out = model(input_ids=ids, labels=labels)
        assert out.logits.shape == (2, 3)
        flat = model(input_ids=ids.view(6, 7)).logits.view(2, 3)  # the same rows scored one by one
        torch.testing.assert_close(out.logits, flat)
        want = listwise_loss if loss == "listwise" else pointwise_loss
        torch.testing.assert_close(out.loss, want(out.logits, labels))
    with pytest.raises(ConfigError, match="ranking_loss='hinge'"):
        ErnieForTextRanking(tiny_config(40, ranking_loss="hinge"))


def test_group_metrics_rank_ties_pessimistically():
    m = group_metrics([[0.9, 0.1, 0.5], [0.2, 0.8, 0.1], [0.3, 0.3, 0.3]], [[1, 0, 0], [1, 0, 0], [1, 0, 0]])
    # ranks 1, 2 and 3 (a constant scorer earns nothing from a tie)
    assert m["mrr"] == pytest.approx((1 + 1 / 2 + 1 / 3) / 3) and m["recall@1"] == pytest.approx(1 / 3)
    assert m["ndcg@10"] == pytest.approx((1 + 1 / np.log2(3) + 1 / np.log2(4)) / 3)
    with pytest.raises(DataError, match="no relevant passage"):
        group_metrics([[0.1, 0.2]], [[0, 0]])


# ------------------------------------------------------------------ mining

def test_bm25_mining_is_deterministic_and_never_returns_the_positive():
    queries, positives = ["北京天气", "北京大学", "早茶"], [CORPUS[0], CORPUS[5], CORPUS[3]]
    first = mine_negatives(queries, positives, corpus=CORPUS, count=3)
    assert first == mine_negatives(queries, positives, corpus=CORPUS, count=3)
    for negs, pos in zip(first, positives):
        assert len(negs) == 3 and pos not in negs and len(set(negs)) == 3
    assert first[0][0] == CORPUS[2]  # the other Beijing weather report ranks first
    scores = BM25(CORPUS).scores(["北京天气"])[0]
    assert scores.argmax() == 0 and scores[3] == 0.0
    # a query matching nothing: its negatives are the corpus in order (ties go to the lower index)
    assert mine_negatives(["zzz"], [CORPUS[0]], corpus=CORPUS, count=2) == [[CORPUS[1], CORPUS[2]]]
    with pytest.raises(ConfigError, match="method='bm52'.*Did you mean 'bm25'"):
        mine_negatives(queries, positives, method="bm52")


def test_random_negatives_are_seeded_and_interleave_with_bm25():
    queries, positives = ["北京天气", "北京大学", "早茶"], [CORPUS[0], CORPUS[5], CORPUS[3]]
    drawn = mine_negatives(queries, positives, corpus=CORPUS, count=3, method="random")
    assert drawn == mine_negatives(queries, positives, corpus=CORPUS, count=3, method="random")
    assert drawn != mine_negatives(queries, positives, corpus=CORPUS, count=3, method="random", seed=1)
    for negs, pos in zip(drawn, positives):
        assert len(negs) == 3 and pos not in negs and len(set(negs)) == 3
    mixed = mine_negatives(queries, positives, corpus=CORPUS, count=4, method="bm25+random")
    bm25 = mine_negatives(queries, positives, corpus=CORPUS, count=4)
    drawn = mine_negatives(queries, positives, corpus=CORPUS, count=4, method="random")
    for m, b, r, pos in zip(mixed, bm25, drawn, positives):
        expected = []  # BM25's best, then a drawn one, and so on, duplicates skipped
        for t in (t for pair in zip(b, r) for t in pair):
            if t not in expected and len(expected) < 4:
                expected.append(t)
        assert m == expected and pos not in m and len(set(m)) == 4


def test_embedding_mining_uses_the_models_ranking_and_interleaves_with_bm25_or_random(tmp_path):
    from nlp.tasks.embedding.heads import ErnieForSentenceEmbedding
    from nlp.tasks.embedding.pipeline import SentenceSimilarityPipeline

    torch.manual_seed(0)
    model = tmp_path / "emb"
    ErnieForSentenceEmbedding.from_pretrained(ASSET).save_pretrained(model)
    load_tokenizer(ASSET).save_pretrained(model)
    sim = SentenceSimilarityPipeline(model)
    queries, positives = ["北京天气", "早茶"], [CORPUS[0], CORPUS[3]]
    dense = mine_negatives(queries, positives, method="embedding", count=2, corpus=CORPUS, model=sim)
    index = sim.index(CORPUS, truncate=True)
    for q, negs, pos, row in zip(queries, dense, positives, sim.search(queries, index, top_k=6, truncate=True)):
        assert negs == [h["text"] for h in row if h["text"] != pos][:2]
    both = mine_negatives(queries, positives, method="bm25+embedding", count=4, corpus=CORPUS, model=sim)
    lexical = mine_negatives(queries, positives, count=4, corpus=CORPUS)
    assert both[0][0] == lexical[0][0] and both == mine_negatives(queries, positives, method="bm25+embedding",
                                                                  count=4, corpus=CORPUS, model=sim)
    mixed = mine_negatives(queries, positives, method="embedding+random", count=4, corpus=CORPUS, model=sim)
    dense = mine_negatives(queries, positives, method="embedding", count=4, corpus=CORPUS, model=sim)
    drawn = mine_negatives(queries, positives, method="random", count=4, corpus=CORPUS)
    for m, d, r, pos in zip(mixed, dense, drawn, positives):
        expected = []  # the model's best, then a drawn one, and so on, duplicates skipped
        for t in (t for pair in zip(d, r) for t in pair):
            if t not in expected and len(expected) < 4:
                expected.append(t)
        assert m == expected and pos not in m and len(set(m)) == 4
    with pytest.raises(ConfigError, match="needs model="):
        mine_negatives(queries, positives, method="embedding")


def test_the_mining_command_refuses_the_test_split(tmp_path):
    with pytest.raises(SystemExit, match="test split is for scoring only"):
        mining_main(["--data", "inews-titles", "--split", "test", "--out", str(tmp_path / "x.jsonl")])


def test_featurize_mines_groups_from_the_split_itself(reranker):
    from types import SimpleNamespace

    spec = get_task("rerank")
    tok = load_tokenizer(reranker)
    settings = spec.settings(name="text-ranking", negatives="bm25", num_negatives=2, max_query_length=8)
    columns = {"texts": [["北京天气", CORPUS[0]], ["北京大学", CORPUS[5]], ["早茶", CORPUS[3]]]}
    feats = spec.featurize(columns, tok, SimpleNamespace(max_length=32), None, settings=settings)
    assert [len(g) for g in feats["input_ids"]] == [3, 3, 3] and feats["labels"][0] == [1.0, 0.0, 0.0]
    first_neg = tok.decode(feats["input_ids"][0][1], skip_special_tokens=True).replace(" ", "")
    assert first_neg == "北京天气" + CORPUS[5]  # mined among the split's own positives, not elsewhere
    with pytest.raises(DataError, match="record 0 has 0 negatives; task.num_negatives is 2"):
        spec.featurize(columns, tok, SimpleNamespace(max_length=32), None,
                       settings=spec.settings(name="text-ranking", num_negatives=2))


# ------------------------------------------------------------------ pipeline

def test_pipeline_ranks_best_first_with_indices_and_texts(reranker):
    rr = nlp.pipeline("text-ranking", model=str(reranker))
    assert isinstance(rr, TextRankingPipeline) and nlp.pipeline("reranker", model=str(reranker)).task == "text-ranking"
    ranking = rr("北京的天气怎么样", CORPUS, return_text=True)
    raw = rr.score_pairs([("北京的天气怎么样", p) for p in CORPUS])
    assert [r["index"] for r in ranking] == list(np.argsort(-np.asarray(raw), kind="stable"))
    assert all(r["text"] == CORPUS[r["index"]] for r in ranking)
    assert [r["score"] for r in ranking] == pytest.approx(list(1 / (1 + np.exp(-np.sort(raw)[::-1]))))
    assert [r["score"] for r in rr("北京的天气怎么样", CORPUS, raw_scores=True)] == pytest.approx(sorted(raw)[::-1])
    top = rr("北京的天气怎么样", CORPUS, top_k=2)
    assert [(r["index"], set(r)) for r in top] == [(r["index"], {"index", "score"}) for r in ranking[:2]]
    both = rr(["北京的天气怎么样", "早茶"], [CORPUS, CORPUS[:2]])
    assert [r["index"] for r in both[0]] == [r["index"] for r in ranking] and len(both[1]) == 2
    assert [r["score"] for r in both[0]] == pytest.approx([r["score"] for r in ranking], abs=1e-5)
    assert rr("早茶", []) == []
    with pytest.raises(DataError, match="2 queries but 1 lists"):
        rr(["a", "b"], [CORPUS])
    with pytest.raises(DataError, match="passage 1 .* has no tokens"):
        rr("早茶", ["早茶", "\u200b"])


def test_a_long_passage_scores_as_its_best_window(reranker):
    rr = TextRankingPipeline(str(reranker), max_length=32, max_query_length=8)
    long = "今天的新闻很多。" * 6 + "北京明天多云转阴。" + "广州的早茶很有名。" * 6
    rows, owners = pair_windows(rr.tokenizer, ["北京天气"], [long], max_length=32, max_query_length=8)
    assert len(rows) > 3 and set(owners) == {0} and all(len(r["input_ids"]) <= 32 for r in rows)
    model = rr.model.eval()
    with torch.no_grad():
        each = [model(input_ids=torch.tensor([r["input_ids"]]),
                      token_type_ids=torch.tensor([r["token_type_ids"]])).logits.item() for r in rows]
    assert rr.score_pairs([("北京天气", long)]) == pytest.approx([max(each)], abs=1e-5)
    assert rr.score_pairs([("北京天气", long)], truncate=True) == pytest.approx([each[0]], abs=1e-5)
    # a query longer than max_query_length is cut to it, so the passage keeps its room
    cut = pair_windows(rr.tokenizer, ["北京" * 40], ["早茶"], max_length=32, max_query_length=8)[0]
    assert cut[0]["token_type_ids"].count(0) == 8 + 2


# ------------------------------------------------------------------ search with a reranker

@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    """A sentence-similarity pipeline on ernie-tiny-zh with a seeded random embedding head: the first stage."""
    from nlp.tasks.embedding.heads import ErnieForSentenceEmbedding

    torch.manual_seed(1)
    emb = tmp_path_factory.mktemp("ranking") / "emb"
    ErnieForSentenceEmbedding.from_pretrained(ASSET).save_pretrained(emb)
    load_tokenizer(ASSET).save_pretrained(emb)
    return nlp.pipeline("sentence-similarity", model=str(emb))


def test_search_retrieves_then_reranks(reranker, sim):
    rr = nlp.pipeline("text-ranking", model=str(reranker))
    first = sim.search("北京天气", CORPUS, top_k=4)
    hits = sim.search("北京天气", CORPUS, top_k=2, rerank=rr, rerank_top_k=4)
    scored = rr("北京天气", [h["text"] for h in first], raw_scores=False)
    assert [h["corpus_id"] for h in hits] == [first[r["index"]]["corpus_id"] for r in scored[:2]]
    assert [h["score"] for h in hits] == pytest.approx([r["score"] for r in scored[:2]])
    assert all(h["retrieval_score"] == next(f["score"] for f in first if f["corpus_id"] == h["corpus_id"])
               for h in hits)
    many = sim.search(["北京天气", "早茶"], CORPUS, top_k=3, rerank=rr)  # default depth: max(top_k, 20)
    assert len(many) == 2 and all(len(row) == 3 for row in many)
    shortest_first = lambda q, ps: [{"index": i, "score": -len(ps[i])} for i in np.argsort([len(p) for p in ps])]
    assert [h["text"] for h in sim.search("北京天气", CORPUS, top_k=6, rerank=shortest_first)] == sorted(CORPUS, key=len)
    with pytest.raises(ConfigError, match="rerank_top_k must be an int >= top_k"):
        sim.search("北京天气", CORPUS, top_k=3, rerank=rr, rerank_top_k=2)
    with pytest.raises(ConfigError, match="without rerank"):
        sim.search("北京天气", CORPUS, rerank_top_k=5)
    with pytest.raises(DataError, match="must rank every passage"):
        sim.search("北京天气", CORPUS, top_k=2, rerank=lambda q, ps: [{"index": 0, "score": 1.0}])


def test_search_fuses_first_stage_and_reranker_scores_when_weighted(reranker, sim):
    rr = nlp.pipeline("text-ranking", model=str(reranker))
    first = sim.search("北京天气", CORPUS, top_k=6)
    logits = {r["index"]: r["score"] for r in rr("北京天气", [h["text"] for h in first], raw_scores=True)}
    z = lambda a: (np.asarray(a) - np.mean(a)) / np.std(a)
    retrieval, given = [h["score"] for h in first], [logits[i] for i in range(6)]
    for weight in (0.3, 1.0, 4.0):
        expected = z(retrieval) + weight * z(given)  # the reranker's logits, not their sigmoid
        hits = sim.search("北京天气", CORPUS, top_k=4, rerank=rr, rerank_top_k=6, rerank_weight=weight)
        order = list(np.argsort(-expected, kind="stable")[:4])
        assert [h["corpus_id"] for h in hits] == [first[i]["corpus_id"] for i in order]
        assert [h["score"] for h in hits] == pytest.approx([expected[i] for i in order])
        assert [h["rerank_score"] for h in hits] == pytest.approx([given[i] for i in order])
        assert [h["retrieval_score"] for h in hits] == pytest.approx([retrieval[i] for i in order])
    # a reranker bound to read first windows only (how benchmarks/retrieval.py scores) still gives its logits
    long_corpus = CORPUS + ["北京" * 200 + "天气晴朗"]
    found = sim.search("北京天气", long_corpus, top_k=7)
    texts = [h["text"] for h in found]
    cut = {r["index"]: r["score"] for r in rr("北京天气", texts, raw_scores=True, truncate=True)}
    windowed = {r["index"]: r["score"] for r in rr("北京天气", texts, raw_scores=True)}
    assert cut != pytest.approx(windowed)  # the long text scores otherwise by its first window: the case tells
    expected = z([h["score"] for h in found]) + 0.5 * z([cut[i] for i in range(7)])
    first_windows = functools.partial(rr, truncate=True)
    hits = sim.search("北京天气", long_corpus, top_k=7, rerank=first_windows, rerank_weight=0.5)
    assert [h["score"] for h in hits] == pytest.approx(sorted(expected, reverse=True))
    # weight 0: the first stage's order; a reranker that only says "shortest first" decides at a large weight
    assert [h["corpus_id"] for h in sim.search("北京天气", CORPUS, top_k=6, rerank=rr, rerank_weight=0)] == \
        [h["corpus_id"] for h in first]
    shortest_first = lambda q, ps: [{"index": i, "score": -len(ps[i])} for i in np.argsort([len(p) for p in ps])]
    fused = sim.search("北京天气", CORPUS, top_k=1, rerank=shortest_first, rerank_weight=1e6)
    assert fused[0]["text"] == min(CORPUS, key=len)
    for bad in (-0.5, float("nan"), True, "0.7"):
        with pytest.raises(ConfigError, match="rerank_weight must be a finite number >= 0"):
            sim.search("北京天气", CORPUS, rerank=rr, rerank_weight=bad)
    with pytest.raises(ConfigError, match="rerank_weight is given without rerank"):
        sim.search("北京天气", CORPUS, rerank_weight=0.5)


def test_fused_scores_standardise_each_query_and_equal_scores_carry_no_order():
    from nlp.tasks.embedding.rerank import fused_scores

    fused = fused_scores([[1.0, 2.0, 3.0], [5.0, 5.0, 5.0]], [[3.0, 2.0, 1.0], [0.0, 1.0, 2.0]], 0.5)
    assert fused[0] == pytest.approx(np.array([-1.0, 0.0, 1.0]) * np.sqrt(1.5) * 0.5)
    assert fused[1] == pytest.approx(np.array([-1.0, 0.0, 1.0]) * np.sqrt(1.5) * 0.5)  # the first stage tied
    assert np.isfinite(fused_scores([[2.0, 2.0]], [[1.0, 1.0]], 1.0)).all()
    with pytest.raises(DataError, match="one of each per candidate"):
        fused_scores([[1.0, 2.0]], [[1.0]], 1.0)


# ------------------------------------------------------------------ export

def test_exports_score_as_pytorch_does(reranker, tmp_path, capsys):
    from nlp.cli import main
    from nlp.deploy import export_model

    torch_rr = nlp.pipeline("text-ranking", model=str(reranker))
    pairs = [("北京的天气怎么样", p) for p in CORPUS] + [("早茶", "广州的早茶很有名。" * 30)]
    expected = np.asarray(torch_rr.score_pairs(pairs))
    for quantize in (None, "int8"):
        if quantize is None:
            out = export_model(reranker, tmp_path / f"export-{quantize}", quantize=quantize).out
        else:  # the command's summary reports the order of scores, not an argmax of one score
            out = tmp_path / "export-int8"
            assert main(["export", str(reranker), "--out", str(out), "--quantize", "int8"]) == 0
            printed = capsys.readouterr().out
            assert "scores order the check texts' pairs as PyTorch does on" in printed
            assert "labels agree" not in printed
        exported = nlp.pipeline("text-ranking", model=str(out))
        got = np.asarray(exported.score_pairs(pairs))
        if quantize is None:
            np.testing.assert_allclose(got, expected, atol=1e-4)
        else:  # dynamic int8 of a random head: the same ranking's shape, not the same digits
            assert np.corrcoef(got, expected)[0, 1] > 0.9 and got.argmax() == expected.argmax()
        manifest = json.loads((Path(out) / "manifest.json").read_text(encoding="utf-8"))
        assert manifest["task"] == "text-ranking" and manifest["outputs"][0]["shape"] == ["batch", 1]
        check = manifest["check"]["int8" if quantize else "fp32"]
        assert check["order_agreement"] >= (1.0 if quantize is None else 0.8)
