"""The embedding task's own parts: metrics, losses, the head, the reader, the built-in benchmarks,
and the pipelines (tiny random models; the shipped ernie-tiny-zh where loading matters)."""

from __future__ import annotations

import json
import math
import socket
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from nlp._common import ConfigError, DataError
from nlp.models import ErnieConfig
from nlp.tasks.embedding.data import read_embedding
from nlp.tasks.embedding.heads import ErnieForSentenceEmbedding, cosent, info_nce
from nlp.tasks.embedding.metrics import retrieval_metrics, spearman
from nlp.tasks.embedding.pipeline import EmbeddingIndex, FeatureExtractionPipeline, SentenceSimilarityPipeline

sys.path.insert(0, str(Path(__file__).parent))
from _task_fixtures import wordpiece_tokenizer  # noqa: E402
# a spawned process unpickles its function by module name: a top-level module on the sys.path the
# children inherit, not this test module (whose importlib name `tests.tasks...` they cannot import)
from _info_nce_worker import info_nce_worker  # noqa: E402

TEXTS = ["今天天气很好", "明天会下雨吗", "这家餐厅的服务非常好", "北京大学在北京", "张三在上海工作"]


def tiny_config(**extra) -> ErnieConfig:
    cfg = ErnieConfig(vocab_size=200, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                      intermediate_size=64, max_position_embeddings=64)
    cfg.extra.update(extra)
    return cfg


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("embed-model")
    tok = wordpiece_tokenizer(TEXTS)
    torch.manual_seed(0)
    cfg = tiny_config()
    cfg.vocab_size = len(tok.get_vocab())
    model = ErnieForSentenceEmbedding(cfg)
    model.save_pretrained(d)
    tok.save_pretrained(d)
    return d


# ---------------------------------------------------------------- metrics

def test_spearman_matches_a_hand_computed_case_with_ties():
    # ranks of x: [1, 2.5, 2.5, 4]; of y: [1, 2, 3, 4]; d = [0, .5, -.5, 0]
    # Pearson of the ranks: cov = 2.5 + ... computed by hand below
    x, y = [0.1, 0.5, 0.5, 0.9], [1, 2, 3, 4]
    rx, ry = np.array([1, 2.5, 2.5, 4]), np.array([1, 2, 3, 4.0])
    rx, ry = rx - rx.mean(), ry - ry.mean()
    expected = (rx * ry).sum() / math.sqrt((rx ** 2).sum() * (ry ** 2).sum())
    assert spearman(x, y) == pytest.approx(expected)
    assert expected == pytest.approx(0.9486832980505138)
    assert spearman([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    assert spearman([1, 1, 1], [1, 2, 3]) == 0.0


def test_spearman_refuses_nan_and_mismatched_lengths():
    with pytest.raises(DataError, match="NaN"):
        spearman([0.1, float("nan")], [1, 2])
    with pytest.raises(DataError, match="equal length"):
        spearman([0.1, 0.2], [1, 2, 3])


def test_retrieval_metrics_hand_computed():
    docs = np.eye(3, dtype=np.float32)  # three orthogonal documents
    queries = np.array([[1, 0, 0],          # finds doc 0 first: rank 1
                        [0.9, 0.1, 0],      # relevant doc 1 ranks 2nd
                        [0.5, 0.4, 0.1]],   # relevant doc 2 ranks 3rd
                       dtype=np.float32)
    m = retrieval_metrics(queries, docs, [0, 1, 2], ks=(1, 2))
    assert m["recall@1"] == pytest.approx(1 / 3)
    assert m["recall@2"] == pytest.approx(2 / 3)
    assert m["mrr"] == pytest.approx((1 + 1 / 2 + 1 / 3) / 3)


def test_retrieval_metrics_rank_ties_pessimistically():
    # a constant model must not look perfect
    m = retrieval_metrics(np.ones((4, 2)), np.ones((4, 2)), [0, 1, 2, 3])
    assert m["recall@1"] == 0.0 and m["mrr"] == pytest.approx(0.25)


# ---------------------------------------------------------------- losses

def test_info_nce_equals_cross_entropy_over_the_batch():
    torch.manual_seed(0)
    q, p, n = torch.randn(4, 8), torch.randn(4, 8), torch.randn(4, 8)
    logits = F.normalize(q, dim=-1) @ torch.cat([F.normalize(p, dim=-1), F.normalize(n, dim=-1)]).T / 0.05
    expected = F.cross_entropy(logits, torch.arange(4))
    assert info_nce(q, p, n, 0.05).item() == pytest.approx(expected.item(), rel=1e-6)


def test_cosent_prefers_the_right_order():
    a = torch.tensor([[1.0, 0.0], [1.0, 0.0]])
    right = torch.tensor([[1.0, 0.1], [0.0, 1.0]])  # pair 0 close, pair 1 far
    scores = torch.tensor([5.0, 1.0])
    good = cosent(a, right, scores)
    bad = cosent(a, right, torch.tensor([1.0, 5.0]))
    assert good.item() < 0.01 < bad.item()
    # equal scores impose no order: log(1 + 0)
    assert cosent(a, right, torch.tensor([2.0, 2.0])).item() == pytest.approx(0.0, abs=1e-7)


def test_info_nce_gathers_negatives_across_processes(tmp_path):
    """Two gloo processes, each with its share of the batch: the weighted losses and the
    gradients equal one process's on the whole batch (the global batch is the negative pool)."""
    import torch.multiprocessing as mp

    torch.manual_seed(1)
    q, p = torch.randn(5, 8), torch.randn(5, 8)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.start_processes(info_nce_worker, args=(2, port, q, p, str(tmp_path)), nprocs=2, join=True, start_method="spawn")
    r0 = torch.load(tmp_path / "rank0.pt", weights_only=True)
    r1 = torch.load(tmp_path / "rank1.pt", weights_only=True)
    qa, pa = q.clone().requires_grad_(True), p.clone().requires_grad_(True)
    whole = info_nce(qa, pa, None, 0.1)
    whole.backward()
    assert (r0["loss"] * 3 + r1["loss"] * 2).item() / 5 == pytest.approx(whole.item(), rel=1e-6)
    assert torch.allclose(torch.cat([r0["gq"], r1["gq"]]), qa.grad, atol=1e-6)
    # a positive's gradient comes from every process's queries (summed by the gather's backward)
    assert torch.allclose(torch.cat([r0["gp"], r1["gp"]]), pa.grad, atol=1e-6)


# ---------------------------------------------------------------- the head

def test_head_shapes_losses_and_pooling():
    torch.manual_seed(0)
    model = ErnieForSentenceEmbedding(tiny_config(hidden_dropout_prob=0.1))
    ids = torch.randint(5, 200, (3, 2, 7))
    mask = torch.ones_like(ids)
    mask[0, 1, 4:] = 0
    model.train()
    out = model(ids, mask)
    assert out.sentence_embedding.shape == (3, 2, 32) and out.loss.requires_grad
    model.eval()
    flat = model(ids[:, 1], mask[:, 1]).sentence_embedding
    assert torch.allclose(flat, model(ids, mask).sentence_embedding[:, 1], atol=1e-6)
    # mean pooling ignores padded tokens: the padded row equals the row cut to its length
    alone = model(ids[:1, 1, :4], mask[:1, 1, :4]).sentence_embedding
    assert torch.allclose(alone[0], flat[0], atol=1e-5)
    # scored pairs: CoSENT; a score per pair
    model.train()
    assert model(ids, mask, labels=torch.tensor([0.1, 0.9, 0.5])).loss.ndim == 0


def test_simcse_needs_dropout_and_trains_with_it():
    cfg = ErnieConfig(vocab_size=200, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                      intermediate_size=64, max_position_embeddings=64, hidden_dropout_prob=0.0,
                      attention_probs_dropout_prob=0.0)
    model = ErnieForSentenceEmbedding(cfg).train()
    ids = torch.randint(5, 200, (4, 1, 6))
    with pytest.raises(ConfigError, match="hidden_dropout_prob=0.1"):
        model(ids)
    cfg.hidden_dropout_prob = 0.1
    model = ErnieForSentenceEmbedding(cfg).train()
    out = model(ids)
    assert out.loss is not None and out.sentence_embedding.shape == (4, 1, 32)
    assert model.eval()(ids).loss is None  # one text per example in evaluation: nothing to score


def test_bad_settings_and_shapes_are_refused():
    with pytest.raises(ConfigError, match="pooling"):
        ErnieForSentenceEmbedding(tiny_config(pooling="max"))
    with pytest.raises(ConfigError, match="contrastive_temperature"):
        ErnieForSentenceEmbedding(tiny_config(contrastive_temperature=0))
    model = ErnieForSentenceEmbedding(tiny_config())
    with pytest.raises(DataError, match="batch, texts, sequence"):
        model(torch.randint(5, 200, (2, 1, 1, 4)))
    with pytest.raises(DataError, match="exactly 2 texts"):
        model.train()(torch.randint(5, 200, (2, 3, 4)), labels=torch.tensor([1.0, 2.0]))


def test_saved_model_loads_in_transformers_with_the_same_vectors(tmp_path):
    from transformers import AutoModel

    torch.manual_seed(0)
    model = ErnieForSentenceEmbedding(tiny_config(pooling="mean")).eval()
    model.save_pretrained(tmp_path)
    modules = json.loads((tmp_path / "modules.json").read_text())
    assert [m["type"].rsplit(".", 1)[1] for m in modules] == ["Transformer", "Pooling", "Normalize"]
    assert json.loads((tmp_path / "1_Pooling" / "config.json").read_text())["pooling_mode_mean_tokens"]
    ids = torch.randint(5, 200, (2, 6))
    mask = torch.tensor([[1] * 6, [1, 1, 1, 0, 0, 0]])
    ours = model(ids, mask).sentence_embedding
    hf = AutoModel.from_pretrained(tmp_path).eval()
    with torch.no_grad():
        h = hf(input_ids=ids, attention_mask=mask).last_hidden_state
    m = mask.unsqueeze(-1).float()
    torch.testing.assert_close((h * m).sum(1) / m.sum(1), ours, atol=1e-5, rtol=1e-5)
    again = ErnieForSentenceEmbedding.from_pretrained(tmp_path)
    assert again.pooling == "mean"
    torch.testing.assert_close(again(ids, mask).sentence_embedding, ours)


# ---------------------------------------------------------------- the reader

def _jsonl(path: Path, rows) -> Path:
    path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n", encoding="utf-8")
    return path


def test_reader_kinds(tmp_path):
    ds = read_embedding(_jsonl(tmp_path / "r.jsonl", [{"query": "问", "positive": "答", "negative": "错"},
                                                      {"query": "问二", "positive": "答二", "negative": "错二"}]))
    assert ds["texts"] == [["问", "答", "错"], ["问二", "答二", "错二"]]
    ds = read_embedding(_jsonl(tmp_path / "s.jsonl", [{"text1": "甲", "text2": "乙", "score": 3}]))
    assert ds["texts"] == [["甲", "乙"]] and ds["score"] == [3.0]
    (tmp_path / "plain.txt").write_text("第一句\n\n第二句\n", encoding="utf-8")
    ds, stats = read_embedding(tmp_path / "plain.txt", return_stats=True)
    assert ds["texts"] == [["第一句"], ["第二句"]] and stats.skipped["blank lines"] == 1
    ds = read_embedding(_jsonl(tmp_path / "q.jsonl", [{"question": "问", "answer": "答"}]),
                        query_column="question", positive_column="answer")
    assert ds["texts"] == [["问", "答"]]


@pytest.mark.parametrize("rows, match", [
    ([{"q": "问"}], r"found fields \['q'\]"),
    ([{"query": "问", "positive": 3}], "'positive' must be a string"),
    ([{"text1": "甲", "text2": "乙", "score": "high"}], "finite number"),
    ([{"query": "问", "positive": "答"}, {"text": "单"}], "keep one kind per file"),
    ([{"query": "问", "positive": "答", "negative": "错"}, {"query": "问二", "positive": "答二"}], "negative"),
    ([{"query": " ", "positive": "答"}], "no records with text"),
])
def test_reader_errors_name_the_record(tmp_path, rows, match):
    with pytest.raises(DataError, match=match):
        read_embedding(_jsonl(tmp_path / "bad.jsonl", rows))


# ---------------------------------------------------------------- pipelines

def test_feature_extraction_pipeline(model_dir):
    fe = FeatureExtractionPipeline(model_dir, max_length=12)
    vecs = fe(TEXTS)
    assert vecs.shape == (5, 32) and vecs.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vecs, axis=1), 1.0, rtol=1e-5)
    raw = fe(TEXTS[0], normalize=False)
    np.testing.assert_allclose(raw / np.linalg.norm(raw), vecs[0], rtol=1e-5)
    assert fe([]).shape == (0, 32)
    assert isinstance(fe(TEXTS[:2], as_lists=True)[0][0], float)
    with pytest.raises(DataError, match="text 1 .* has no tokens"):
        fe(["好", " "])


def test_long_texts_are_windowed_not_truncated(model_dir):
    fe = FeatureExtractionPipeline(model_dir, max_length=8)
    long = "今天天气很好" + "明天会下雨吗" * 4
    whole, first = fe(long), fe(long, truncate=True)
    assert not np.allclose(whole, first)  # the later windows count
    np.testing.assert_allclose(first, fe(long[:6]), atol=1e-5)  # truncate: the first window only
    assert np.isfinite(whole).all()


def test_similarity_and_search(model_dir, tmp_path):
    sim = SentenceSimilarityPipeline(model_dir, max_length=12)
    scores = sim(TEXTS[0], TEXTS)
    assert len(scores) == 5 and scores[0] == pytest.approx(1.0, abs=1e-5)
    assert sim(TEXTS[:2], TEXTS[2:4]) == pytest.approx([sim(TEXTS[0], TEXTS[2]), sim(TEXTS[1], TEXTS[3])])
    hits = sim.search(TEXTS[3], TEXTS, top_k=2)
    assert [h["corpus_id"] for h in hits][0] == 3 and len(hits) == 2
    assert hits[0]["score"] >= hits[1]["score"]
    sim.index(TEXTS).save(tmp_path / "idx")
    saved = sim.search(TEXTS[3], tmp_path / "idx", top_k=2)
    assert [h["corpus_id"] for h in saved] == [h["corpus_id"] for h in hits]
    assert [h["score"] for h in saved] == pytest.approx([h["score"] for h in hits], abs=1e-6)
    assert sim.search("天气", [], top_k=3) == []
    with pytest.raises(DataError, match="2 sources but 3 targets"):
        sim(TEXTS[:2], TEXTS[:3])
    with pytest.raises(ConfigError, match="top_k"):
        sim.search("天气", TEXTS, top_k=0)
    with pytest.raises(DataError, match="not an embedding index"):
        EmbeddingIndex.load(tmp_path)
