"""Pretraining: a few steps of a tiny model through the engine, resume, the held-out corpus."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from nlp._common import ConfigError
from nlp.train.corpus import build_corpus, held_out_texts
from nlp.train.pretrain import _labelled_predictions, pretrain, pretrain_recipe_from_dict

TINY = {
    "model": {"preset": "ernie-3.0-tiny-pico-v2-zh", "init": "random",
              "config": {"num_hidden_layers": 1, "hidden_size": 32, "num_attention_heads": 2,
                         "intermediate_size": 64, "hidden_dropout_prob": 0.0,
                         "attention_probs_dropout_prob": 0.0, "max_position_embeddings": 64}},
    "tokenizer": {"vocab_size": 3000},
    "corpus": {"sources": ["sanguo"], "max_documents": 2, "max_length": 32, "eval_rows": 16,
               "char_level_fraction": 0.5},
    "train": {"max_steps": 30, "seed": 3, "optim": {"lr": 3e-3}, "schedule": {"warmup_ratio": 0.0},
              "data": {"batch_size": 16}, "eval": {"every_steps": 30, "at_epoch_end": False},
              "checkpoint": {"every_steps": 10, "keep_last": 5, "load_best_at_end": False},
              "log": {"every_steps": 5, "progress_bar": False, "tensorboard": False, "plots": False}},
}


def recipe(out: Path, tokenizer: Path | None = None, **train):
    data = json.loads(json.dumps(TINY))
    if tokenizer is not None:  # a retrained BPE vocabulary may break ties differently
        data["tokenizer"]["name"] = str(tokenizer)
    data["train"].update(output_dir=str(out), **train)
    return pretrain_recipe_from_dict(data)


def records(out: Path, kind: str = "train") -> list[dict]:
    lines = (out / "metrics.jsonl").read_text().splitlines()
    return [r for r in map(json.loads, lines) if r["type"] == kind]


@pytest.fixture(scope="module")
def full_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("pre") / "full"
    return out, pretrain(recipe(out))


def test_loss_decreases_and_model_dir_is_complete(full_run):
    out, result = full_run
    losses = [r["loss"] for r in records(out)]
    assert len(losses) == 6
    assert sum(losses[-2:]) / 2 < losses[0] - 0.5, losses
    assert result.train.step == 30
    (ev,) = records(out, "eval")
    assert 0.0 <= ev["eval_mlm_accuracy"] <= 1.0 and ev["eval_loss"] > 0
    # model/ is a complete, loadable MLM directory (weights, config, tokenizer)
    from nlp.models import ErnieForMaskedLM
    from nlp.tokenizer import load_tokenizer

    model = ErnieForMaskedLM.from_pretrained(result.model_dir)
    tok = load_tokenizer(result.model_dir)
    assert model.config.vocab_size == tok.vocab_size
    assert json.loads((result.model_dir / "config.json").read_text())["architectures"] == ["ErnieForMaskedLM"]
    assert (out / "tokenizer" / "tokenizer_config.json").is_file() and (out / "recipe.yaml").is_file()


def test_resume_continues_the_same_curve(full_run, tmp_path):
    out_full, _ = full_run
    out = tmp_path / "resumed"
    class Stop:
        def on_step_end(self, trainer, state):
            if state.step == 20:
                trainer.request_stop()

    from nlp.train import TrainingInterrupted

    with pytest.raises(TrainingInterrupted):
        pretrain(recipe(out, out_full / "tokenizer"), callbacks=[Stop()])
    assert (out / "tokenizer" / "tokenizer_config.json").is_file()
    # the second session reuses the run's saved tokenizer (not the recipe's) and masks as the
    # unbroken run did
    pretrain(recipe(out))
    full = {r["step"]: r["loss"] for r in records(out_full)}
    resumed = {r["step"]: r["loss"] for r in records(out)}
    assert set(resumed) == set(full)
    for step, loss in full.items():
        assert resumed[step] == pytest.approx(loss, rel=1e-4, abs=1e-5), step


def test_sparse_head_matches_the_dense_loss():
    from nlp.models import ErnieForMaskedLM, preset_config

    torch.manual_seed(0)
    config = preset_config("ernie-3.0-tiny-pico-v2-zh", vocab_size=100, num_hidden_layers=1)
    dense = ErnieForMaskedLM(config).eval()
    sparse = ErnieForMaskedLM(config, sparse_logits=True).eval()
    sparse.load_state_dict(dense.state_dict())
    ids = torch.randint(5, 100, (2, 12))
    labels = torch.full_like(ids, -100)
    labels[0, 3], labels[1, 5], labels[1, 6] = 7, 8, 9
    want = dense(ids, labels=labels)
    got = sparse(ids, labels=labels)
    torch.testing.assert_close(got.loss, want.loss)
    predictions = _labelled_predictions(got, {"labels": labels})  # what evaluation keeps
    assert predictions[0, 3] == want.logits[0, 3].argmax() and predictions[0, 0] == -100


def test_corpus_excludes_held_out_texts():
    corpus = build_corpus()
    held = held_out_texts()
    reviews = set(corpus["reviews"])
    assert held["reviews"] and not reviews & set(held["reviews"])
    sentences = set(held["peoples-daily"])
    pd_text = "\n".join(corpus["peoples-daily"])
    # every long held-out sentence is absent (short ones like "（完）" may recur in other text)
    long = [s for s in sentences if len(s) >= 12]
    assert len(long) > 1000
    assert not [s for s in long if s in pd_text]
    assert len(corpus["sanguo"]) == 120 and len(corpus["peoples-daily"]) > 10000


def test_recipe_errors_reported_together():
    bad = json.loads(json.dumps(TINY))
    bad["corpus"]["sources"] = ["sanguoo"]
    bad["masking"] = {"mlm_probability": 2}
    bad["train"]["optim"]["lrr"] = 1
    with pytest.raises(ConfigError) as err:
        pretrain_recipe_from_dict(bad)
    msg = str(err.value)
    assert "3 problems" in msg and "sanguo" in msg and "mlm_probability" in msg and "Did you mean 'lr'" in msg


def test_builtin_recipe_validates():
    import yaml

    path = Path(__file__).parents[2] / "recipes" / "pretrain" / "ernie-tiny-zh.yaml"
    text = path.read_text(encoding="utf-8")
    assert text.startswith("# nlp pretrain recipes/pretrain/ernie-tiny-zh.yaml")
    r = pretrain_recipe_from_dict(yaml.safe_load(text))
    assert r.model.config["attention_probs_dropout_prob"] == 0.0


def test_char_level_rows_feed_characters_like_ner(full_run):
    from nlp.tokenizer import load_tokenizer
    from nlp.train.pretrain import build_rows

    out, _ = full_run
    tok = load_tokenizer(out / "tokenizer")
    text = "刘备关羽张飞"
    rows = build_rows(tok, [text], 16, char_level_fraction=1.0)
    chars = tok(list(text), is_split_into_words=True)["input_ids"]
    assert rows[0]["input_ids"].tolist() == chars
    words = build_rows(tok, [text], 16, char_level_fraction=0.0)
    assert words[0]["input_ids"].tolist() == tok(text)["input_ids"]


def test_wordpiece_kind_trains_a_character_vocabulary(tmp_path):
    from nlp.tokenizer import WordPieceTokenizer, load_tokenizer
    from nlp.train.pretrain import build_rows

    data = json.loads(json.dumps(TINY))
    data["tokenizer"] = {"kind": "wordpiece", "vocab_size": 3000}
    data["corpus"]["char_level_fraction"] = 0.0
    data["train"].update(output_dir=str(tmp_path / "wp"), max_steps=4)
    data["train"]["eval"]["every_steps"] = 4
    result = pretrain(pretrain_recipe_from_dict(data))
    tok = load_tokenizer(result.model_dir)
    assert isinstance(tok, WordPieceTokenizer) and result.train.step == 4
    # one token per character, but whole jieba words share a word id (masked together)
    row = build_rows(tok, ["刘备关羽张飞"], 16)[0]
    assert len(row["input_ids"]) == 6 + 2
    words = row["word_ids"].tolist()[1:-1]
    assert words[0] == words[1] and words[0] != words[2]  # 刘备 | 关羽


def test_unknown_tokenizer_kind_is_refused_with_the_choices():
    bad = json.loads(json.dumps(TINY))
    bad["tokenizer"]["kind"] = "wordpeice"
    with pytest.raises(ConfigError, match="hybrid, wordpiece.*Did you mean 'wordpiece'"):
        pretrain_recipe_from_dict(bad)


def test_sinusoidal_position_init_is_a_scaled_wave_table(tmp_path):
    from nlp.train.pretrain import _model_for

    data = json.loads(json.dumps(TINY))
    data["model"]["position_init"] = "sinusoidal"
    r = pretrain_recipe_from_dict(data)
    table = _model_for(r, 100, 0).backbone.embeddings.position.weight.detach()
    assert abs(float(table.std()) - 0.02) < 1e-3
    # column 0 is sin(position), column 1 cos(position), up to the scale
    scale = float(table[1, 0]) / torch.sin(torch.tensor(1.0))
    assert torch.allclose(table[:, 0], scale * torch.sin(torch.arange(64.0)), atol=1e-6)
    assert torch.allclose(table[:, 1], scale * torch.cos(torch.arange(64.0)), atol=1e-6)
    data["model"]["position_init"] = "sinus"
    with pytest.raises(ConfigError, match="position_init"):
        pretrain_recipe_from_dict(data)
