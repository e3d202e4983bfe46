"""Vocabulary pruning of an XLM-R unigram tokenizer (tokenizer.json with scores): the kept pieces
keep their scores and order, ids are re-mapped, and the model's outputs on covered text are the
original's."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from nlp.models import ErnieConfig
from nlp.tasks.embedding.heads import ErnieForSentenceEmbedding
from nlp.tokenizer import UnigramTokenizer, build_unigram_backend, load_tokenizer
from nlp.train.vocab_pruning import prune_vocabulary

TEXTS = ["我爱北京天安门！", "北京天安门", "天安门广场很大"]


@pytest.fixture
def model_dir(tmp_path):
    pieces = [("<s>", 0.0), ("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0), ("▁", -2.0), ("▁北京", -3.0),
              ("北京", -3.5), ("北", -6.0), ("京", -6.0), ("我", -5.0), ("▁我", -4.0), ("爱", -5.0),
              ("天安门", -4.0), ("天", -7.0), ("安", -7.0), ("门", -7.0), ("!", -3.0), ("广场", -4.5),
              ("广", -8.0), ("场", -8.0), ("很", -5.0), ("大", -5.0), ("▁天", -5.5), ("上海", -4.0),
              ("东京", -4.0), ("abc", -9.0), ("▁q", -4.0), (":", -4.0), ("<mask>", 0.0)]
    tok = UnigramTokenizer(build_unigram_backend(pieces, 3, {"！": "!"}), model_max_length=32)
    config = ErnieConfig(model_type="xlm-roberta", vocab_size=len(pieces) + 3, hidden_size=24, num_hidden_layers=2,
                         num_attention_heads=2, intermediate_size=48, max_position_embeddings=34,
                         type_vocab_size=1, pad_token_id=1, layer_norm_eps=1e-5,
                         extra={"prompts": {"query": "q: "}, "default_prompt_name": "query"})
    torch.manual_seed(0)
    ErnieForSentenceEmbedding(config).save_pretrained(tmp_path / "src")
    tok.save_pretrained(tmp_path / "src")
    return tmp_path / "src"


def _embed(directory, texts):
    tok = load_tokenizer(directory)
    model = ErnieForSentenceEmbedding.from_pretrained(directory)
    enc = tok(texts, padding=True, return_tensors="pt")
    with torch.no_grad():
        return model.embed(enc["input_ids"], enc["attention_mask"])[0].numpy(), enc["input_ids"]


def test_pruned_unigram_keeps_outputs_on_covered_text(model_dir, tmp_path):
    r = prune_vocabulary(model_dir, TEXTS, tmp_path / "out", task="feature-extraction")
    # the prompt the model declares goes before every text it embeds: its pieces stay too
    old = load_tokenizer(model_dir)
    new = load_tokenizer(r.out)
    assert isinstance(new, UnigramTokenizer) and r.vocab_before == 32  # 3 embedding rows no piece reaches, as in e5-small
    kept = [p for p, _ in new.pieces()]
    used = {t for text in TEXTS + ["q: "] for t in old.tokenize(text)}
    assert used == {"▁我", "爱", "北京", "天安门", "!", "▁北京", "▁", "广场", "很", "大", "▁q", ":"}
    # what the texts use, the specials, and the lowest-scored piece ("abc": the unknown's score),
    # in their old order
    assert kept == [p for p, _ in old.pieces() if p in used | {"<s>", "<pad>", "</s>", "<unk>", "<mask>", "abc"}]
    assert r.kept == len(kept) == json.loads((r.out / "config.json").read_text())["vocab_size"]
    assert new.tokenize("q: 北京") == old.tokenize("q: 北京") == ["▁q", ":", "▁北京"]
    assert dict(new.pieces()) == {p: s for p, s in old.pieces() if p in kept}
    assert new.pad_token_id == 1 and new.mask_token_id == len(kept) - 1
    before, ids_before = _embed(model_dir, TEXTS)
    after, ids_after = _embed(r.out, TEXTS)
    assert [new.convert_ids_to_tokens(row) for row in ids_after.tolist()] == \
        [old.convert_ids_to_tokens(row) for row in ids_before.tolist()]
    np.testing.assert_allclose(after, before, atol=1e-6)
    assert new("上海")["input_ids"] != old("上海")["input_ids"]  # an unseen piece is gone
