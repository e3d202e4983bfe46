"""Prompts an embedding model declares (config.json `prompts`, or its hub card) are applied by the
pipelines and /embed by role, on an XLM-R model with XLM-R's unigram tokenizer."""

from __future__ import annotations

import numpy as np
import pytest

import nlp
from nlp._common import ConfigError
from nlp.models import ErnieConfig
from nlp.tasks.embedding.heads import ErnieForSentenceEmbedding
from nlp.tasks.embedding.prompts import Prompts, insert_prompt, prompt_ids
from nlp.tasks.embedding.serving import EmbedAdapter
from nlp.tasks.serving import Limits, RequestError
from nlp.tokenizer import UnigramTokenizer, build_unigram_backend

TEXTS = ["北京是中国的首都", "上海是经济中心", "今天下雨了", "天气很好"]
E5 = {"prompts": {"query": "query: ", "passage": "passage: "}, "default_prompt_name": "query"}


def _model_dir(tmp_path, prompts):
    chars = sorted({c for t in TEXTS + ["query: passage: "] for c in t if c != " "})
    pieces = [("<s>", 0.0), ("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0), ("▁", -2.0),
              ("▁query", -3.0), ("▁passage", -3.0), *((c, -5.0) for c in chars), ("<mask>", 0.0)]
    tok = UnigramTokenizer(build_unigram_backend(pieces, 3), model_max_length=16)
    config = ErnieConfig(model_type="xlm-roberta", vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=2,
                         num_attention_heads=2, intermediate_size=48, max_position_embeddings=18, type_vocab_size=1,
                         pad_token_id=1, layer_norm_eps=1e-5, extra=dict(prompts))
    ErnieForSentenceEmbedding(config).save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    return tmp_path


@pytest.fixture
def e5_like(tmp_path):
    return nlp.pipeline("sentence-similarity", model=str(_model_dir(tmp_path, E5)), max_length=16)


def _plain(pipe, texts):
    return pipe._encode(texts, False, truncate=False, stride=None, normalize=True)[0]


def test_prompts_go_before_texts_by_name_and_default(e5_like):
    assert e5_like("北京", ["北京"]) == pytest.approx([1.0], abs=1e-5)  # both sides: the default prompt
    np.testing.assert_allclose(e5_like.encode(["北京"], prompt_name="passage")[0], _plain(e5_like, ["passage: 北京"]), atol=1e-6)
    np.testing.assert_allclose(e5_like.encode(["北京"])[0], _plain(e5_like, ["query: 北京"]), atol=1e-6)
    assert not np.allclose(_plain(e5_like, ["query: 北京"]), _plain(e5_like, ["passage: 北京"]))
    with pytest.raises(ConfigError, match=r"prompt_name='pasage'.*\['passage', 'query'\].*Did you mean 'passage'"):
        e5_like.encode(["北京"], prompt_name="pasage")


def test_search_prompts_queries_and_passages(e5_like):
    hits = e5_like.search("北京", TEXTS, top_k=4)
    q, d = _plain(e5_like, ["query: 北京"]), _plain(e5_like, [f"passage: {t}" for t in TEXTS])
    expected = sorted(((float(s), i) for i, s in enumerate(d @ q[0])), reverse=True)
    assert [h["corpus_id"] for h in hits] == [i for _, i in expected]
    assert [h["score"] for h in hits] == pytest.approx([s for s, _ in expected], abs=1e-5)


def test_every_window_of_a_long_text_starts_with_the_prompt(e5_like):
    prompt = prompt_ids(e5_like.tokenizer, "passage: ")
    long = "".join(TEXTS * 3)
    rows = e5_like._windows([long], True, truncate=False, stride=None, prompt="passage: ")
    assert len(rows) > 2 and all(len(ids) <= 16 for ids, *_ in rows)
    assert all(ids[1:1 + len(prompt)] == prompt for ids, *_ in rows)


def test_embed_route_takes_a_prompt_name(e5_like):
    served = type("Served", (), {"pipeline": e5_like, "max_length": 16})()
    adapter = EmbedAdapter()
    parsed = adapter.parse_body({"inputs": ["北京"], "prompt_name": "passage"}, served, Limits(max_inputs=8, max_text_chars=100))
    out = adapter.run(served, parsed.items, parsed.key)
    np.testing.assert_allclose(out[0], _plain(e5_like, ["passage: 北京"])[0], atol=1e-6)
    with pytest.raises(RequestError, match="not a prompt of this model") as err:
        adapter.parse_body({"inputs": ["北京"], "prompt_name": "document"}, served, Limits(max_inputs=8, max_text_chars=100))
    assert err.value.status == 422


def test_a_model_without_prompts_and_card_prompts(tmp_path, monkeypatch):
    pipe = nlp.pipeline("feature-extraction", model=str(_model_dir(tmp_path, {})), max_length=16)
    np.testing.assert_allclose(pipe(["北京"]), _plain(pipe, ["北京"]), atol=1e-6)  # no prompt at all
    assert Prompts.from_config({"prompts": {"query": "q: "}}).for_role("passage") == ""  # BGE: queries only
    with pytest.raises(ConfigError, match="default_prompt_name='x'"):
        Prompts.from_config({"prompts": {"query": "q: "}, "default_prompt_name": "x"})
    from nlp import auto, hub

    card = hub.ModelCard.from_dict({"name": "tiny-e5", "architecture": "xlm-roberta", **E5,
                                    "sources": [{"kind": "local", "path": str(tmp_path)}]})
    monkeypatch.setattr(hub.registry, "find_card", lambda name: card if name == "tiny-e5" else None)
    monkeypatch.setattr(auto, "resolve", lambda name, **kw: tmp_path)
    pipe = nlp.pipeline("feature-extraction", model="tiny-e5", max_length=16)
    np.testing.assert_allclose(pipe(["北京"]), _plain(pipe, ["query: 北京"]), atol=1e-6)


def test_card_pooling_builds_the_model_with_it(tmp_path, monkeypatch):
    """A card's `pooling` (bge-m3: cls) applies where the model's config.json declares none."""
    import json

    import torch

    from nlp import auto, hub

    directory = _model_dir(tmp_path, {})
    config = json.loads((directory / "config.json").read_text())
    del config["pooling"]  # as a hub repo's config.json: the pooling lives in 1_Pooling/
    (directory / "config.json").write_text(json.dumps(config))
    card = hub.ModelCard.from_dict({"name": "tiny-bge", "architecture": "xlm-roberta", "pooling": "cls",
                                    "sources": [{"kind": "local", "path": str(directory)}]})
    assert card.to_dict()["pooling"] == "cls"
    monkeypatch.setattr(hub.registry, "find_card", lambda name: card if name == "tiny-bge" else None)
    monkeypatch.setattr(auto, "resolve", lambda name, **kw: directory)
    pipe = nlp.pipeline("feature-extraction", model="tiny-bge", max_length=16)
    assert pipe.model.pooling == "cls" and nlp.pipeline("feature-extraction", model=str(directory)).model.pooling == "mean"
    enc = pipe.tokenizer(["北京"], return_tensors="pt")
    with torch.no_grad():
        cls = pipe.model.backbone(enc["input_ids"], enc["attention_mask"]).last_hidden_state[:, 0]
    np.testing.assert_allclose(pipe(["北京"]), torch.nn.functional.normalize(cls, dim=-1).numpy(), atol=1e-5)
    with pytest.raises(ConfigError, match="pooling 'max'"):
        hub.ModelCard.from_dict({"name": "x", "architecture": "bert", "pooling": "max",
                                 "sources": [{"kind": "local", "path": str(directory)}]})


def test_a_prompt_goes_after_the_first_token_and_a_text_too_long_loses_its_end():
    row = {"input_ids": [0, 10, 11, 12, 2], "attention_mask": [1] * 5}
    assert insert_prompt(row, [7, 8]) == {"input_ids": [0, 7, 8, 10, 11, 12, 2], "attention_mask": [1] * 7}
    assert insert_prompt(row, [7, 8], max_length=6) == {"input_ids": [0, 7, 8, 10, 11, 2], "attention_mask": [1] * 6}
    assert insert_prompt({**row, "token_type_ids": [0] * 5}, [7])["token_type_ids"] == [0] * 6
    with pytest.raises(ValueError, match="per-token key 'labels'"):
        insert_prompt({**row, "labels": [0] * 5}, [7])
