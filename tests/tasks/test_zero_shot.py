"""Zero-shot classification with an embedding model: transformers' call and answer shape, the
prompts by role, single- and multi-label scores, the checks on labels and template, the default
model's lookup, `nlp predict`, and the served route over HTTP (parameters checked, 422 naming the
bound, OpenAPI)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import httpx
import numpy as np
import pytest

import nlp
from nlp._common import ConfigError
from nlp.models import ErnieConfig
from nlp.tasks import get_task
from nlp.tasks.embedding.heads import ErnieForSentenceEmbedding
from nlp.tokenizer import UnigramTokenizer, build_unigram_backend

sys.path.insert(0, str(Path(__file__).parents[1] / "deploy"))
import _serve_fixtures as fx  # noqa: E402

TEXTS = ["国足客场两球击败对手", "股市今天大跌", "新手机发布了"]
LABELS = ["体育", "财经", "科技"]
TEMPLATE = "这是一条关于{}的新闻"


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    """A tiny XLM-R-like embedding model with e5's prompts and a unigram tokenizer."""
    import torch

    out = tmp_path_factory.mktemp("zero-shot")
    chars = sorted({c for t in [*TEXTS, *LABELS, TEMPLATE, "甲乙中query: passage: "] for c in t if c != " "})
    pieces = [("<s>", 0.0), ("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0), ("▁", -2.0), ("▁query", -3.0),
              ("▁passage", -3.0), *((c, -5.0) for c in chars), ("<mask>", 0.0)]
    tok = UnigramTokenizer(build_unigram_backend(pieces, 3), model_max_length=32)
    config = ErnieConfig(model_type="xlm-roberta", vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=2,
                         num_attention_heads=2, intermediate_size=48, max_position_embeddings=34, type_vocab_size=1,
                         pad_token_id=1, layer_norm_eps=1e-5,
                         extra={"prompts": {"query": "query: ", "passage": "passage: "}, "default_prompt_name": "query"})
    torch.manual_seed(0)
    ErnieForSentenceEmbedding(config).save_pretrained(out)
    tok.save_pretrained(out)
    return out


@pytest.fixture(scope="module")
def zsc(model_dir):
    return nlp.pipeline("zero-shot-classification", model=str(model_dir))


def _cosines(model_dir, texts, hypotheses):
    emb = nlp.pipeline("feature-extraction", model=str(model_dir))
    return emb(texts, prompt_name="query") @ emb(hypotheses, prompt_name="passage").T


def test_answers_in_transformers_shape_scored_by_prompted_cosines(zsc, model_dir):
    one = zsc(TEXTS[0], candidate_labels=LABELS, hypothesis_template=TEMPLATE)
    assert set(one) == {"sequence", "labels", "scores"} and one["sequence"] == TEXTS[0]
    assert sorted(one["labels"]) == sorted(LABELS) and one["scores"] == sorted(one["scores"], reverse=True)
    assert sum(one["scores"]) == pytest.approx(1.0, abs=1e-5)
    many = zsc(TEXTS, LABELS, hypothesis_template=TEMPLATE)  # labels positional, as transformers allows
    assert [a["sequence"] for a in many] == TEXTS and many[0]["labels"] == one["labels"]
    # a text alone or padded in a batch: the same answer up to the float order of the sums
    assert many[0]["scores"] == pytest.approx(one["scores"], abs=1e-5)
    # the text gets the "query" prompt, each label in its template the "passage" prompt
    cos = _cosines(model_dir, TEXTS, [TEMPLATE.format(label) for label in LABELS])
    t = zsc.temperature
    for row, answer in zip(cos, many):
        expected = np.exp(row / t) / np.exp(row / t).sum()
        got = dict(zip(answer["labels"], answer["scores"]))
        assert [got[label] for label in LABELS] == pytest.approx(expected.tolist(), abs=1e-5)
    assert zsc([], LABELS) == []


def test_multi_label_scores_each_label_on_its_own(zsc, model_dir):
    both = zsc(TEXTS[1], LABELS, multi_label=True)
    alone = zsc(TEXTS[1], LABELS[:2], multi_label=True)
    by_label = dict(zip(both["labels"], both["scores"]))
    assert dict(zip(alone["labels"], alone["scores"])) == pytest.approx({k: by_label[k] for k in LABELS[:2]})
    cos = _cosines(model_dir, [TEXTS[1]], LABELS)[0]  # the default template: the label itself
    assert [by_label[label] for label in LABELS] == pytest.approx(cos.tolist(), abs=1e-5)
    single = zsc(TEXTS[1], [LABELS[0]])  # one label: its cosine, as transformers makes it multi-label
    assert single["scores"] == pytest.approx([by_label[LABELS[0]]], abs=1e-6)
    assert zsc(TEXTS[1], "体育, 财经,科技", multi_label=True) == both  # one string, separated by commas


@pytest.mark.parametrize("labels, template, message", [
    ([], "{}", "candidate_labels is empty"),
    (None, "{}", "candidate_labels is empty"),
    (["体育", " "], "{}", r"candidate_labels\[1\] must be a non-blank string"),
    (["体育", "体育"], "{}", "names '体育' twice"),
    (LABELS, "这是一条新闻", "has no {} for the label"),
    (LABELS, "关于{}的{}", "cannot take a label"),
    (LABELS, "{label}", "cannot take a label"),
])
def test_bad_labels_and_templates_say_what_to_give(zsc, labels, template, message):
    with pytest.raises(ConfigError, match=message):
        zsc(TEXTS[0], labels, hypothesis_template=template)


def test_no_model_uses_the_embedding_task_default_through_its_lookup(monkeypatch, model_dir):
    spec = get_task("feature-extraction")
    assert get_task("zero-shot-classification").default_model == spec.default_model
    monkeypatch.setattr(type(spec), "default_model", "some-embedding-model")
    assert get_task("zero-shot").default_model == "some-embedding-model"
    monkeypatch.setattr(type(spec), "default_model", None)
    with pytest.raises(ConfigError, match=r"'zero-shot-classification' has no default model: pass model= \(an embedding model"):
        nlp.pipeline("zero-shot-classification")


def test_predict_takes_the_labels_as_one_flag(model_dir, tmp_path, capsys):
    from nlp.cli import main

    texts = tmp_path / "in.txt"
    texts.write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    out = tmp_path / "out.jsonl"
    main(["predict", str(model_dir), "--task", "zero-shot", "--input", str(texts), "--output", str(out),
          "--candidate-labels", ",".join(LABELS), "--hypothesis-template", TEMPLATE])
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    expected = nlp.pipeline("zero-shot-classification", model=str(model_dir))(TEXTS, LABELS,
                                                                              hypothesis_template=TEMPLATE)
    assert [r["labels"] for r in rows] == [e["labels"] for e in expected]
    assert [r["scores"] for r in rows] == [pytest.approx(e["scores"], abs=1e-5) for e in expected]
    capsys.readouterr()
    assert main(["predict", str(model_dir), "--task", "zero-shot", "--input", str(texts), "--output",
                 str(tmp_path / "none.jsonl")]) != 0
    assert "needs the labels to choose from: --candidate-labels" in capsys.readouterr().err


def test_served_route_checks_parameters_and_documents_them(model_dir, zsc):
    from nlp.deploy.server_config import ServeConfig

    config = ServeConfig(model=str(model_dir), task="zero-shot-classification", precision="fp32")
    with fx.running(config) as url:
        body = {"inputs": TEXTS, "parameters": {"candidate_labels": LABELS, "hypothesis_template": TEMPLATE}}
        answer = httpx.post(url + "/predict", json=body, timeout=30)
        assert answer.status_code == 200, answer.text
        expected = zsc(TEXTS, LABELS, hypothesis_template=TEMPLATE)
        assert [a["labels"] for a in answer.json()] == [e["labels"] for e in expected]
        assert [a["scores"] for a in answer.json()] == [pytest.approx(e["scores"], abs=1e-5) for e in expected]
        one = httpx.post(url + "/predict", json={"inputs": TEXTS[0], "parameters": {
            "candidate_labels": LABELS, "multi_label": True}}, timeout=30).json()
        assert one["sequence"] == TEXTS[0] and len(one["scores"]) == 3
        for params, message in [
            ({}, "parameters.candidate_labels is required"),
            ({"candidate_labels": []}, "candidate_labels must be a list of 1 to 100 non-blank strings, got 0"),
            ({"candidate_labels": ["体育"] * 101}, "1 to 100 non-blank strings, got 101"),
            ({"candidate_labels": "体育"}, "must be a list of 1 to 100 non-blank strings"),
            ({"candidate_labels": LABELS, "hypothesis_template": "无标签"}, "has no {} for the label"),
            ({"candidate_labels": ["体育", "体育"]}, "names '体育' twice"),
            ({"candidate_labels": LABELS, "multi_label": "yes"}, "multi_label must be true or false"),
        ]:
            bad = httpx.post(url + "/predict", json={"inputs": TEXTS[0], "parameters": params}, timeout=30)
            assert bad.status_code == 422 and message in bad.json()["message"], (params, bad.text)
        schema = httpx.get(url + "/openapi.json", timeout=30).json()
        text = json.dumps(schema)
        assert '"candidate_labels": {"type": "array"' in text and '"maxItems": 100' in text
