"""Lexical weights (BGE-M3's sparse retrieval) in the embedding task: sparse vectors and their
scores, the head's token weights and hybrid loss (one process and two), save/load, the
pipelines' lexical weights, hybrid similarity and search, and the saved index."""

from __future__ import annotations

import socket
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from nlp._common import ConfigError, DataError
from nlp.models import ErnieConfig
from nlp.tasks.embedding.heads import ErnieForSentenceEmbedding, hybrid_info_nce, shared_sparse_vectors
from nlp.tasks.embedding.metrics import (lexical_pair_scores, lexical_scores, pooled_sparse_vector,
                                         retrieval_metrics, sparse_vector, sts_metrics)
from nlp.tasks.embedding.pipeline import EmbeddingIndex, FeatureExtractionPipeline, SentenceSimilarityPipeline

sys.path.insert(0, str(Path(__file__).parent))
from _task_fixtures import wordpiece_tokenizer  # noqa: E402
from _info_nce_worker import hybrid_info_nce_worker  # noqa: E402

TEXTS = ["今天天气很好", "明天会下雨吗", "这家餐厅的服务非常好", "北京大学在北京", "张三在上海工作"]


def tiny_config(**extra) -> ErnieConfig:
    cfg = ErnieConfig(vocab_size=200, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                      intermediate_size=64, max_position_embeddings=64)
    cfg.extra.update({"lexical_weights": True, **extra})
    return cfg


def _lexical_model(seed: int = 0, vocab_size: int = 200, **extra) -> ErnieForSentenceEmbedding:
    torch.manual_seed(seed)
    cfg = tiny_config(**extra)
    cfg.vocab_size = vocab_size
    model = ErnieForSentenceEmbedding(cfg)
    with torch.no_grad():  # a positive bias: every token weighs something, as after training
        model.lexical_linear.bias.fill_(0.5)
    return model


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("lexical-model")
    tok = wordpiece_tokenizer(TEXTS)
    model = _lexical_model(vocab_size=len(tok.get_vocab()))
    model.save_pretrained(d)
    tok.save_pretrained(d)
    return d


# ---------------------------------------------------------------- sparse vectors and scores

def test_sparse_vector_keeps_the_largest_weight_per_id_and_drops_zeros():
    ids, w = sparse_vector([7, 3, 7, 0, 5, 3], [0.2, 0.5, 0.9, 0.0, 0.0, 0.1])
    assert ids.tolist() == [3, 7] and w.tolist() == pytest.approx([0.5, 0.9])
    empty = sparse_vector([1, 2], [0.0, 0.0])
    assert empty[0].size == 0 and empty[1].size == 0
    with pytest.raises(DataError, match="2 token ids but 3 weights"):
        sparse_vector([1, 2], [0.1, 0.2, 0.3])


def test_lexical_scores_hand_computed():
    a = sparse_vector([1, 2, 3], [1.0, 2.0, 3.0])
    b = sparse_vector([2, 3, 9], [0.5, 1.0, 4.0])
    c = sparse_vector([4], [1.0])
    empty = sparse_vector([], [])
    scores = lexical_scores([a, c, empty], [b, c, a])
    expected = [[2 * 0.5 + 3 * 1.0, 0.0, 14.0], [0.0, 1.0, 0.0], [0.0, 0.0, 0.0]]
    np.testing.assert_allclose(scores, expected, rtol=1e-6)
    np.testing.assert_allclose(lexical_pair_scores([a, c, empty], [b, c, a]), np.diag(expected), rtol=1e-6)
    assert lexical_scores([empty], [empty]).tolist() == [[0.0]]


def test_lexical_scores_in_blocks_equal_one_block(monkeypatch):
    import nlp.tasks.embedding.metrics as metrics

    rng = np.random.default_rng(0)
    rows = [sparse_vector(rng.integers(0, 50, 6), rng.random(6)) for _ in range(9)]
    whole = lexical_scores(rows, rows[:5])
    monkeypatch.setattr(metrics, "_CHUNK_ROWS", 2)
    np.testing.assert_allclose(lexical_scores(rows, rows[:5]), whole, rtol=1e-6)


def test_hybrid_retrieval_and_sts_add_the_lexical_score():
    q = np.array([[1.0, 0.0], [0.0, 1.0]])
    d = np.array([[0.9, 0.1], [0.8, 0.2]])  # by cosine both queries prefer document 0 or 1 ...
    dense = retrieval_metrics(q, d, [1, 0])
    assert dense["recall@1"] == 0.0
    # ... the lexical scores (query i shares token i+1 with document 1-i) turn both around
    lexical = ([sparse_vector([1], [1.0]), sparse_vector([2], [1.0])],
               [sparse_vector([2], [1.0]), sparse_vector([1], [1.0])])
    assert retrieval_metrics(q, d, [1, 0], lexical=lexical)["recall@1"] == 1.0
    gold = [0.0, 1.0]
    plain = sts_metrics(q, d, gold)["spearman"]
    mixed = sts_metrics(q, d, gold, lexical=([sparse_vector([1], [0.0]), sparse_vector([2], [5.0])],
                                             [sparse_vector([1], [1.0]), sparse_vector([2], [1.0])]))["spearman"]
    assert plain == pytest.approx(-1.0) and mixed == pytest.approx(1.0)


# ---------------------------------------------------------------- the head

def test_token_weights_skip_cls_sep_and_padding():
    model = _lexical_model().eval()
    ids = torch.randint(5, 200, (2, 6))
    mask = torch.tensor([[1] * 6, [1, 1, 1, 1, 0, 0]])
    out = model(ids, mask)
    w = out.token_weights
    assert w.shape == (2, 6) and (w >= 0).all()
    assert w[0, 0] == 0 and w[0, 5] == 0 and (w[0, 1:5] > 0).all()
    assert w[1, 0] == 0 and w[1, 3] == 0 and (w[1, 4:] == 0).all() and (w[1, 1:3] > 0).all()
    dense = ErnieForSentenceEmbedding(tiny_config(lexical_weights=False)).eval()
    assert dense(ids, mask).token_weights is None and not dense.has_lexical_weights


def test_shared_sparse_vectors_take_the_max_per_key_over_the_keys_of_every_group():
    keys = torch.tensor([[3, 4, 3, 0]])
    w = torch.tensor([[0.2, 0.7, 0.5, 0.0]], requires_grad=True)
    other = (torch.tensor([[9, 3]]), torch.tensor([[1.0, 2.0]]))
    v, o = shared_sparse_vectors((keys, w), other)  # columns: the keys 0, 3, 4, 9
    assert v.tolist() == [[0.0, pytest.approx(0.5), pytest.approx(0.7), 0.0]]
    assert o.tolist() == [[0.0, 2.0, 0.0, 1.0]]
    v.sum().backward()
    # the max of each key gets the gradient (a weight of 0, a masked token's, ties with the empty slot)
    assert w.grad[0, :3].tolist() == [0.0, 1.0, 1.0]


def _dense_terms(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Rows of weights over the keys 0..n-1: a sparse vector written out densely."""
    return torch.arange(x.shape[1]).expand(x.shape[0], -1), x


def test_hybrid_loss_is_the_mean_of_dense_lexical_and_summed_infonce():
    torch.manual_seed(0)
    q, p, n = torch.randn(3, 8), torch.randn(3, 8), torch.randn(2, 8)
    qs, ps, ns = torch.rand(3, 10), torch.rand(3, 10), torch.rand(2, 10)
    t = 0.05
    dense = F.normalize(q, dim=-1) @ torch.cat([F.normalize(p, dim=-1), F.normalize(n, dim=-1)]).T
    lexical = qs @ torch.cat([ps, ns]).T
    target = torch.arange(3)
    expected = sum(F.cross_entropy(s / t, target) for s in (dense, lexical, dense + lexical)) / 3
    got = hybrid_info_nce(q, p, n, _dense_terms(qs), _dense_terms(ps), _dense_terms(ns), t)
    assert got.item() == pytest.approx(expected.item(), rel=1e-5)


def test_head_trains_lexical_weights_on_pairs_and_refuses_other_data():
    model = _lexical_model(hidden_dropout_prob=0.1).train()
    ids = torch.randint(5, 200, (4, 3, 7))  # query, positive, hard negative
    out = model(ids, torch.ones_like(ids))
    assert out.token_weights.shape == (4, 3, 7)
    out.loss.backward()
    assert model.lexical_linear.weight.grad.abs().sum() > 0
    with pytest.raises(ConfigError, match="scored pairs.*lexical_weights=false"):
        model(ids[:, :2], labels=torch.tensor([0.1, 0.2, 0.3, 0.4]))
    with pytest.raises(ConfigError, match="single texts"):
        model(ids[:, :1])
    model.eval()  # evaluating scored pairs: CoSENT on the vectors as the loss, no refusal
    assert model(ids[:, :2], labels=torch.tensor([0.1, 0.2, 0.3, 0.4])).loss.ndim == 0
    with pytest.raises(ConfigError, match="lexical_weights must be true or false"):
        ErnieForSentenceEmbedding(tiny_config(lexical_weights="yes"))


def test_hybrid_loss_gathers_across_processes(tmp_path):
    """Two gloo processes, unequal shares: the weighted losses and every gradient equal one
    process's on the whole batch (dense and sparse candidates both come from the global batch)."""
    import torch.multiprocessing as mp

    torch.manual_seed(2)
    q, p, qs, ps = torch.randn(5, 8), torch.randn(5, 8), torch.rand(5, 12), torch.rand(5, 12)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.start_processes(hybrid_info_nce_worker, args=(2, port, q, p, qs, ps, str(tmp_path)), nprocs=2, join=True,
                       start_method="spawn")
    r0 = torch.load(tmp_path / "rank0.pt", weights_only=True)
    r1 = torch.load(tmp_path / "rank1.pt", weights_only=True)
    whole_inputs = [t.clone().requires_grad_(True) for t in (q, p, qs, ps)]
    whole = hybrid_info_nce(whole_inputs[0], whole_inputs[1], None, _dense_terms(whole_inputs[2]),
                            _dense_terms(whole_inputs[3]), None, 0.1)
    whole.backward()
    assert (r0["loss"] * 3 + r1["loss"] * 2).item() / 5 == pytest.approx(whole.item(), rel=1e-6)
    for k, t in enumerate(whole_inputs):
        assert torch.allclose(torch.cat([r0["grads"][k], r1["grads"][k]]), t.grad, atol=1e-6), k


def test_saved_lexical_model_round_trips_and_loads_in_transformers(tmp_path):
    from transformers import AutoModel

    model = _lexical_model().eval()
    model.save_pretrained(tmp_path)
    again = ErnieForSentenceEmbedding.from_pretrained(tmp_path)
    assert again.has_lexical_weights
    ids = torch.randint(5, 200, (2, 6))
    torch.testing.assert_close(again(ids).token_weights, model(ids).token_weights)
    AutoModel.from_pretrained(tmp_path)  # the backbone loads; lexical_linear is an unused head weight


# ---------------------------------------------------------------- pipelines and the index

def test_pooled_sparse_vector_is_the_token_weighted_mean_of_the_windows():
    ids, w = pooled_sparse_vector([([1, 2, 2], [0.4, 0.2, 0.6], 3.0), ([2, 5], [0.3, 0.8], 1.0)])
    assert ids.tolist() == [1, 2, 5]
    assert w.tolist() == pytest.approx([0.4 * 0.75, 0.6 * 0.75 + 0.3 * 0.25, 0.8 * 0.25])
    one = pooled_sparse_vector([([4, 4, 0], [0.1, 0.7, 0.0], 2.0)])  # one window: its own sparse vector
    assert one[0].tolist() == [4] and one[1].tolist() == pytest.approx([0.7])
    assert pooled_sparse_vector([])[0].size == 0


def test_lexical_weights_of_a_long_text_pool_its_windows(model_dir):
    pipe = FeatureExtractionPipeline(str(model_dir), max_length=8)  # 6 tokens a window: long texts overlap
    text = "北京大学在北京今天天气很好张三在上海工作"
    whole = pipe.lexical_weights(text)
    assert whole and all(w > 0 for w in whole.values())
    assert list(whole.values()) == sorted(whole.values(), reverse=True)
    enc = pipe.tokenizer(text, truncation=True, max_length=8, stride=1, return_overflowing_tokens=True)
    windows = []
    for row in enc["input_ids"]:
        out = pipe.backend({"input_ids": np.asarray([row]), "attention_mask": np.ones((1, len(row)), np.int64)})
        windows.append((row, out["token_weights"][0], len(row)))
    assert len(windows) > 2
    ids, weights = pooled_sparse_vector(windows)
    assert sorted(whole) == ids.tolist()
    assert [whole[i] for i in ids.tolist()] == pytest.approx(weights.tolist(), rel=1e-5)
    first = pipe.lexical_weights(text, truncate=True)  # the first window alone
    first_ids, first_weights = sparse_vector(windows[0][0], windows[0][1])
    assert sorted(first) == first_ids.tolist() and set(first) < set(whole)
    assert [first[i] for i in first_ids.tolist()] == pytest.approx(first_weights.tolist(), rel=1e-5)
    tokens = pipe.lexical_weights([text], as_tokens=True)[0]
    assert set(tokens) == set(pipe.tokenizer.convert_ids_to_tokens(list(whole)))
    assert pipe.lexical_weights([]) == []


def test_similarity_is_hybrid_for_a_lexical_model(model_dir):
    sim = SentenceSimilarityPipeline(str(model_dir))
    emb = FeatureExtractionPipeline(str(model_dir))
    a, b = TEXTS[3], TEXTS[4]
    cosine = float(emb(a) @ emb(b))
    wa, wb = emb.lexical_weights(a), emb.lexical_weights(b)
    lexical = sum(w * wb[t] for t, w in wa.items() if t in wb)
    assert lexical > 0  # they share 在
    assert sim(a, b) == pytest.approx(cosine + lexical, rel=1e-5)
    assert sim(a, b, scoring="dense") == pytest.approx(cosine, rel=1e-5)
    assert sim(a, b, scoring="lexical") == pytest.approx(lexical, rel=1e-5)
    assert sim(a, [b, a]) == pytest.approx([cosine + lexical, sim(a, a)], rel=1e-5)
    with pytest.raises(ConfigError, match="scoring='bm25' is not one of"):
        sim(a, b, scoring="bm25")


def test_hybrid_search_and_a_saved_index(model_dir, tmp_path):
    sim = SentenceSimilarityPipeline(str(model_dir))
    hits = sim.search(TEXTS[3], TEXTS, top_k=5)
    assert hits[0]["corpus_id"] == 3 and [h["score"] for h in hits] == sorted((h["score"] for h in hits), reverse=True)
    for h in hits:
        assert h["score"] == pytest.approx(sim(TEXTS[3], h["text"]), rel=1e-5)
    index = sim.index(TEXTS)
    assert index.lexical is not None and len(index.lexical) == len(TEXTS)
    index.save(tmp_path / "idx")
    loaded = EmbeddingIndex.load(tmp_path / "idx")
    for ours, theirs in zip(loaded.lexical, index.lexical):
        assert ours[0].tolist() == theirs[0].tolist() and np.allclose(ours[1], theirs[1])
    again = sim.search(TEXTS[3], tmp_path / "idx", top_k=5)
    assert [h["corpus_id"] for h in again] == [h["corpus_id"] for h in hits]
    assert [h["score"] for h in again] == pytest.approx([h["score"] for h in hits], rel=1e-5)
    dense_hits = sim.search(TEXTS[3], tmp_path / "idx", top_k=5, scoring="dense")
    assert dense_hits[0]["score"] == pytest.approx(1.0, abs=1e-5)
    # an index of vectors alone (a dense model's) cannot be searched by lexical score
    EmbeddingIndex(index.vectors, TEXTS).save(tmp_path / "idx")
    assert not (tmp_path / "idx" / "lexical.npz").exists()
    with pytest.raises(ConfigError, match="needs an index with lexical weights"):
        sim.search(TEXTS[3], tmp_path / "idx")


def test_a_corrupt_lexical_file_is_refused(model_dir, tmp_path):
    sim = SentenceSimilarityPipeline(str(model_dir))
    sim.index(TEXTS).save(tmp_path / "idx")
    with np.load(tmp_path / "idx" / "lexical.npz") as data:
        parts = {k: data[k] for k in data.files}
    np.savez(tmp_path / "idx" / "lexical.npz", **{**parts, "indptr": parts["indptr"][:-1]})
    with pytest.raises(DataError, match="do not fit the index's 5 rows"):
        EmbeddingIndex.load(tmp_path / "idx")
    (tmp_path / "idx" / "lexical.npz").write_bytes(b"not a zip")
    with pytest.raises(DataError, match="unreadable lexical weights"):
        EmbeddingIndex.load(tmp_path / "idx")


def test_a_dense_model_has_no_lexical_weights(tmp_path):
    tok = wordpiece_tokenizer(TEXTS)
    cfg = tiny_config(lexical_weights=False)
    cfg.vocab_size = len(tok.get_vocab())
    ErnieForSentenceEmbedding(cfg).save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    sim = SentenceSimilarityPipeline(str(tmp_path))
    assert not sim.has_lexical_weights
    with pytest.raises(ConfigError, match="no lexical weights"):
        sim.lexical_weights(TEXTS[0])
    with pytest.raises(ConfigError, match="no lexical weights"):
        sim(TEXTS[0], TEXTS[1], scoring="hybrid")
    assert sim.index(TEXTS).lexical is None
    assert sim(TEXTS[0], TEXTS[0]) == pytest.approx(1.0, abs=1e-5)  # cosine alone


def test_a_long_text_is_searched_by_its_best_window(model_dir, tmp_path):
    sim = SentenceSimilarityPipeline(str(model_dir), max_length=8)  # 6 tokens a window
    corpus = ["今天天气很好", "北京大学在北京今天天气很好张三在上海工作明天会下雨吗", "张三在上海工作"]
    query = "张三在上海工作"
    index = sim.index(corpus)
    owners = index.owners.tolist()
    assert owners[0] == 0 and owners[-1] == 2 and owners.count(1) > 2 and len(index.vectors) == len(owners)
    # each window's own hybrid score with the query, from the pipeline's window rows
    windows = sim._windows(corpus, False, truncate=False, stride=None)
    qv, qs = sim._encode([query], True, truncate=False, stride=None)
    qv = qv[0] / np.linalg.norm(qv[0])
    per_window: dict[int, list[float]] = {}
    for _, owner, vec, terms in windows:
        ws = sparse_vector(*terms)
        score = float(vec @ qv / np.linalg.norm(vec)) + float(lexical_scores(qs, [ws])[0, 0])
        per_window.setdefault(owner, []).append(score)
    best = {t: max(s) for t, s in per_window.items()}
    assert len(per_window[1]) > 2 and min(per_window[1]) < best[1]  # the rules differ on text 1
    hits = sim.search(query, index, top_k=3, windows="max")
    assert {h["corpus_id"]: h["score"] for h in hits} == pytest.approx(best, rel=1e-5)
    # the default: the mean of the best window's score and the windows' mean (a short text: its score)
    hits = sim.search(query, index, top_k=3)
    assert {h["corpus_id"]: h["score"] for h in hits} == pytest.approx(
        {t: (max(s) + sum(s) / len(s)) / 2 for t, s in per_window.items()}, rel=1e-5)
    assert hits == sim.search(query, index, top_k=3, windows="max+mean")
    assert {h["corpus_id"]: h["score"] for h in hits}[0] == pytest.approx(best[0], rel=1e-5)
    with pytest.raises(ConfigError, match=r"windows='mean': choose one of max\+mean, max .* Did you mean 'max\+mean'"):
        sim.search(query, corpus, top_k=3, windows="mean")
    index.save(tmp_path / "idx")
    again = EmbeddingIndex.load(tmp_path / "idx")
    assert again.owners.tolist() == owners
    assert [h["corpus_id"] for h in sim.search(query, tmp_path / "idx", top_k=3)] == [h["corpus_id"] for h in hits]
    # the first window only: one row per text, no owners file
    sim.index(corpus, truncate=True).save(tmp_path / "idx")
    assert not (tmp_path / "idx" / "owners.npy").exists() and EmbeddingIndex.load(tmp_path / "idx").owners is None
    index.save(tmp_path / "idx")
    np.save(tmp_path / "idx" / "owners.npy", np.array(owners[::-1]))
    with pytest.raises(DataError, match="owners must give each of its 3 texts one or more rows"):
        EmbeddingIndex.load(tmp_path / "idx")
