"""Bigram lexical weights in the embedding task (config.json `lexical_bigrams: true`): the keys,
the head's pair weights and loss, and the pipelines' sparse vectors, scores and saved index."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from nlp._common import ConfigError
from nlp.models import ErnieConfig
from nlp.tasks.embedding.heads import ErnieForSentenceEmbedding, hybrid_info_nce, lexical_terms as torch_terms
from nlp.tasks.embedding.heads import shared_sparse_vectors
from nlp.tasks.embedding.metrics import (BIGRAM_BASE, bigram_keys, lexical_scores, lexical_terms, sparse_vector,
                                         split_key)
from nlp.tasks.embedding.pipeline import EmbeddingIndex, FeatureExtractionPipeline, SentenceSimilarityPipeline

sys.path.insert(0, str(Path(__file__).parent))
from _task_fixtures import wordpiece_tokenizer  # noqa: E402

TEXTS = ["今天天气很好", "明天会下雨吗", "这家餐厅的服务非常好", "北京大学在北京", "张三在上海工作", "北京天气很好"]


def bigram_model(vocab_size: int = 200, seed: int = 0, **extra) -> ErnieForSentenceEmbedding:
    torch.manual_seed(seed)
    cfg = ErnieConfig(vocab_size=vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                      intermediate_size=64, max_position_embeddings=64)
    cfg.extra.update({"lexical_weights": True, "lexical_bigrams": True, **extra})
    model = ErnieForSentenceEmbedding(cfg)
    with torch.no_grad():  # positive biases: every token and pair weighs something, as after training
        model.lexical_linear.bias.fill_(0.5)
        model.bigram_linear.bias.fill_(0.3)
    return model


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("bigram-model")
    tok = wordpiece_tokenizer(TEXTS)
    bigram_model(vocab_size=len(tok.get_vocab())).save_pretrained(d)
    tok.save_pretrained(d)
    return d


# ---------------------------------------------------------------- keys and terms

def test_bigram_keys_sit_above_every_token_id_and_split_back():
    key = int(bigram_keys(np.int64(5), np.int64(7)))
    assert key == 6 * BIGRAM_BASE + 7 and key > 2**32 - 1
    assert split_key(key) == (5, 7) and split_key(7) == (7,) and split_key(0) == (0,)
    assert split_key(int(bigram_keys(np.int64(0), np.int64(0)))) == (0, 0)  # distinct from token 0
    biggest = int(bigram_keys(np.int64(2**21 - 2), np.int64(2**21 - 2)))
    assert biggest < 2**53  # exact as a JSON number (/embed_sparse) for vocabularies of fewer than 2**21 - 1 ids
    torch_key = bigram_keys(torch.tensor([5]), torch.tensor([7]))
    assert torch_key.dtype == torch.int64 and torch_key.item() == key


def test_lexical_terms_add_each_adjacent_pair_hand_computed():
    keys, weights = lexical_terms([5, 7, 9], [0.0, 0.3, 0.0], [0.2, 0.4, 0.0])
    assert keys.tolist() == [5, 7, 9, int(bigram_keys(5, 7)), int(bigram_keys(7, 9))]
    assert weights.tolist() == pytest.approx([0.0, 0.3, 0.0, 0.2, 0.4])
    ids, w = sparse_vector(keys, weights)  # zeros dropped, sorted by key
    assert ids.tolist() == [7, int(bigram_keys(5, 7)), int(bigram_keys(7, 9))]
    plain = lexical_terms([5, 7], [0.1, 0.2])  # no bigram weights: the tokens alone
    assert plain[0].tolist() == [5, 7]
    with pytest.raises(Exception, match="3 token ids but 2 bigram weights"):
        lexical_terms([5, 7, 9], [0.1, 0.2, 0.3], [0.1, 0.2])


def test_lexical_scores_with_bigram_keys_hand_computed():
    a = sparse_vector(*lexical_terms([1, 2, 3], [1.0, 1.0, 1.0], [0.5, 2.0, 0.0]))  # pairs 1-2, 2-3
    b = sparse_vector(*lexical_terms([2, 3, 4], [1.0, 1.0, 1.0], [3.0, 1.0, 0.0]))  # pairs 2-3, 3-4
    c = sparse_vector(*lexical_terms([3, 2], [1.0, 1.0], [4.0, 0.0]))  # pair 3-2: not 2-3
    scores = lexical_scores([a], [b, c])
    # a.b: tokens 2 and 3 (1 + 1) + the pair 2-3 (2.0 * 3.0); a.c: tokens 2 and 3 alone
    np.testing.assert_allclose(scores, [[2.0 + 6.0, 2.0]], rtol=1e-6)


def test_torch_and_numpy_sparse_vectors_give_the_same_scores():
    rng = np.random.default_rng(0)
    ids = rng.integers(3, 12, (5, 9))  # a small vocabulary: shared tokens and pairs
    tw, bw = rng.random((5, 9)).astype(np.float32), rng.random((5, 9)).astype(np.float32)
    keys, weights = torch_terms(torch.as_tensor(ids), torch.as_tensor(tw), torch.as_tensor(bw))
    q, d = shared_sparse_vectors((keys[:2], weights[:2]), (keys[2:], weights[2:]))
    ours = (q @ d.T).numpy()
    rows = [sparse_vector(*lexical_terms(ids[r], tw[r], bw[r])) for r in range(5)]
    np.testing.assert_allclose(ours, lexical_scores(rows[:2], rows[2:]), rtol=1e-5)


# ---------------------------------------------------------------- the head

def test_pair_weights_skip_cls_sep_padding_and_the_last_position():
    model = bigram_model().eval()
    ids = torch.randint(5, 200, (2, 6))
    mask = torch.tensor([[1] * 6, [1, 1, 1, 1, 0, 0]])
    pairs = model(ids, mask).bigram_weights
    assert pairs.shape == (2, 6) and (pairs >= 0).all()
    # row 0: tokens 1..4 weigh, so the pairs (1, 2), (2, 3), (3, 4) at positions 1..3
    assert pairs[0, 0] == 0 and (pairs[0, 1:4] > 0).all() and (pairs[0, 4:] == 0).all()
    # row 1: tokens 1, 2 weigh ([SEP] at 3): the pair (1, 2) alone
    assert pairs[1, 1] > 0 and pairs[1, 0] == 0 and (pairs[1, 2:] == 0).all()


def test_bigram_settings_are_checked():
    with pytest.raises(ConfigError, match="needs lexical_weights: true too"):
        bigram_model(lexical_weights=False)
    with pytest.raises(ConfigError, match="lexical_bigrams must be true or false"):
        bigram_model(lexical_bigrams="yes")
    assert not ErnieForSentenceEmbedding(ErnieConfig(vocab_size=50, hidden_size=32, num_hidden_layers=1,
                                                     num_attention_heads=2, intermediate_size=64)).has_lexical_weights


def test_head_loss_scores_pairs_and_trains_the_pair_layer():
    model = bigram_model(hidden_dropout_prob=0.0).train()
    ids = torch.randint(5, 200, (3, 2, 7))
    ids[:, 1, :4] = ids[:, 0, :4]  # each positive shares its query's first tokens: tokens and pairs
    mask = torch.ones_like(ids)
    out = model(ids, mask)
    out.loss.backward()
    assert model.bigram_linear.weight.grad.abs().sum() > 0
    # the loss is the hybrid InfoNCE over the texts' tokens and pairs, as computed by hand
    model.eval()
    with torch.no_grad():
        emb, tw, bw = model.embed(ids.view(6, 7), mask.view(6, 7))
        terms = torch_terms(ids.view(6, 7), tw, bw)
        q_terms, p_terms = ((t.view(3, 2, -1)[:, k] for t in terms) for k in (0, 1))
        want = hybrid_info_nce(emb.view(3, 2, -1)[:, 0], emb.view(3, 2, -1)[:, 1], None, tuple(q_terms),
                               tuple(p_terms), None, model.temperature)
        got = model(ids, mask).loss  # eval mode: same weights, no dropout either way
    assert got.item() == pytest.approx(want.item(), rel=1e-5)


def test_saved_bigram_model_round_trips_and_loads_in_transformers(tmp_path):
    from transformers import AutoModel

    model = bigram_model().eval()
    model.save_pretrained(tmp_path)
    assert json.loads((tmp_path / "config.json").read_text())["lexical_bigrams"] is True
    again = ErnieForSentenceEmbedding.from_pretrained(tmp_path)
    ids = torch.randint(5, 200, (2, 6))
    torch.testing.assert_close(again(ids).bigram_weights, model(ids).bigram_weights)
    AutoModel.from_pretrained(tmp_path)  # the backbone loads; the two linears are unused head weights


# ---------------------------------------------------------------- pipelines and the index

def test_lexical_weights_show_pairs_as_two_tokens(model_dir):
    pipe = FeatureExtractionPipeline(str(model_dir))
    by_key = pipe.lexical_weights(TEXTS[3])  # 北京大学在北京
    pairs = [k for k in by_key if k >= BIGRAM_BASE]
    assert pairs and len(pairs) < len(by_key)
    by_token = pipe.lexical_weights(TEXTS[3], as_tokens=True)
    assert "北 京" in by_token and "北" in by_token
    key = int(bigram_keys(*pipe.tokenizer.convert_tokens_to_ids(["北", "京"])))
    assert by_token["北 京"] == pytest.approx(by_key[key])
    # 北京 twice: its weight is the larger of its two occurrences
    out = pipe.backend({k: np.asarray([v]) for k, v in pipe.tokenizer(TEXTS[3]).items()})
    ids = pipe.tokenizer(TEXTS[3])["input_ids"]
    at = [t for t in range(len(ids) - 1) if int(bigram_keys(ids[t], ids[t + 1])) == key]
    assert len(at) == 2 and by_key[key] == pytest.approx(max(out["bigram_weights"][0, t] for t in at), rel=1e-5)


def test_hybrid_similarity_counts_shared_pairs(model_dir):
    sim = SentenceSimilarityPipeline(str(model_dir))
    emb = FeatureExtractionPipeline(str(model_dir))
    a, b = TEXTS[0], TEXTS[5]  # 今天天气很好 / 北京天气很好: the pairs 天气, 气很, 很好 shared
    wa, wb = emb.lexical_weights(a), emb.lexical_weights(b)
    shared_pairs = [k for k in wa if k in wb and k >= BIGRAM_BASE]
    assert len(shared_pairs) == 3
    lexical = sum(w * wb[k] for k, w in wa.items() if k in wb)
    assert sim(a, b, scoring="lexical") == pytest.approx(lexical, rel=1e-5)
    assert sim(a, b) == pytest.approx(float(emb(a) @ emb(b)) + lexical, rel=1e-5)


def test_a_saved_index_keeps_the_bigram_keys(model_dir, tmp_path):
    sim = SentenceSimilarityPipeline(str(model_dir), max_length=8)  # long texts: several windows each
    corpus = TEXTS + ["北京大学在北京今天天气很好张三在上海工作明天会下雨吗"]
    index = sim.index(corpus)
    assert max(int(ids.max()) for ids, _ in index.lexical if len(ids)) >= BIGRAM_BASE
    index.save(tmp_path / "idx")
    loaded = EmbeddingIndex.load(tmp_path / "idx")
    for ours, theirs in zip(loaded.lexical, index.lexical):
        assert ours[0].tolist() == theirs[0].tolist() and np.allclose(ours[1], theirs[1])
    hits = sim.search("北京天气", corpus, top_k=3)
    again = sim.search("北京天气", tmp_path / "idx", top_k=3)
    assert [h["corpus_id"] for h in again] == [h["corpus_id"] for h in hits]
    assert [h["score"] for h in again] == pytest.approx([h["score"] for h in hits], rel=1e-5)
