"""Pretraining: a few steps of a tiny model through the engine, resume, the held-out corpus."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest
import torch

from nlp._common import ConfigError
from nlp.tasks import datasets as nds
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


@pytest.fixture(scope="module")
def corpus_and_held():
    return build_corpus(), held_out_texts()


def test_corpus_has_every_source_and_no_repeated_document(corpus_and_held):
    corpus, held = corpus_and_held
    assert set(corpus) == {"peoples-daily", "sanguo", "reviews", "xinhua-dict", "msra", "inews"}
    assert set(held) == set(nds.BUILTIN)  # every built-in dataset's dev and test are held out
    assert len(corpus["sanguo"]) == 120 and len(corpus["peoples-daily"]) > 10000
    assert sum(map(len, corpus["xinhua-dict"])) > 5_000_000 and len(corpus["inews"]) > 5000
    docs = [d for texts in corpus.values() for d in texts]
    assert len(docs) == len(set(docs))
    # the dictionary is running text: no pinyin, zhuyin or code lines
    dict_text = "\n".join(corpus["xinhua-dict"][:3000])
    assert not re.search(r"[āáǎàēéěèōóǒò]|[ㄅ-ㄩ]|郑码|笔顺编号", dict_text)
    assert "～" not in dict_text


def test_corpus_excludes_every_dev_and_test_text(corpus_and_held):
    corpus, held = corpus_and_held
    reviews = set(corpus["reviews"])
    assert held["reviews-zh"] and not reviews & set(held["reviews-zh"])
    joined = "\n".join(d for texts in corpus.values() for d in texts)
    docs = {d for texts in corpus.values() for d in texts}
    # no document IS a held-out text, whatever its length
    assert not [t for texts in held.values() for t in texts if t in docs]
    # the texts that really recur in a train split (inews reprints, repeated MSRA sentences,
    # People's Daily sentences in MSRA) must be gone, and a sample of every dataset's long ones
    dsd = {name: nds.load(name) for name in nds.BUILTIN}

    def train_texts(name):
        from nlp.tasks import get_task

        return get_task(nds.BUILTIN[name].task).training_texts(dsd[name]["train"])

    recurring = set()
    for name, texts in held.items():
        recurring |= {t for t in set(texts) & set(train_texts(name)) if len(t) >= 12}
    pd_train = "\n".join(train_texts("peoples-daily-1998-ner"))
    recurring |= {t for t in held["msra-ner"][:3000] if len(t) >= 30 and t in pd_train}
    assert len(recurring) > 20
    rng = random.Random(0)
    sample = {t for texts in held.values() for t in rng.sample([t for t in texts if len(t) >= 12], 150)}
    # and the sentences of long held-out articles (an article may be reprinted in part)
    for article in rng.sample(held["inews"], 40):
        sample |= {s for s in re.split(r"(?<=[。！？])", article) if len(s) >= 20}
    joined = re.sub(r"\s+", " ", joined)  # as write_lines writes the corpus
    leaked = [t for t in (re.sub(r"\s+", " ", u).strip() for u in recurring | sample) if t in joined]
    assert not leaked, leaked[:3]


def test_held_out_filter_cuts_sentences_and_drops_whole_texts():
    from nlp.train.corpus import HeldOut

    held = HeldOut(["这是一句足够长的测试集里的句子。另一句也很长很长很长的测试句子！", "短句"])
    doc = "训练文本开头。这是一句足够长的测试集里的句子。训练文本结尾。"
    assert held.clean(doc) == "训练文本开头。训练文本结尾。"
    assert held.clean(" 短句 ") is None  # a document equal to a held-out text, even a short one
    assert held.clean("短句出现在长文里没关系") == "短句出现在长文里没关系"  # short ones recur harmlessly
    assert held.clean("另一句也很长很长很长的测试句子！") is None  # nothing left after the cut
    assert held.found_in("前缀另一句也很长很长很长的测试句子！后缀") == ["另一句也很长很长很长的测试句子！"]
    # a held-out sentence with a run of spaces (web boilerplate in articles) is found as written
    spaced = HeldOut(["已有 0 人转发至微信朋友圈    商业转载请联系作者获得授权。"])
    assert spaced.clean("正文。已有 0 人转发至微信朋友圈    商业转载请联系作者获得授权。") == "正文。"
    assert spaced.clean("正文。已有 0 人转发至微信朋友圈\n商业转载请联系作者获得授权。") == "正文。"


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


def test_layer_map_grows_a_pretrained_model_by_copying_its_layers(full_run, tmp_path):
    from nlp.models import ErnieForMaskedLM
    from nlp.train.pretrain import _model_for

    src_dir = full_run[1].model_dir
    source = ErnieForMaskedLM.from_pretrained(src_dir)
    data = json.loads(json.dumps(TINY))
    data["model"] = {"name": str(src_dir), "init": "pretrained", "layer_map": [0, 0, 0]}
    grown = _model_for(pretrain_recipe_from_dict(data), source.config.vocab_size, 0)
    assert grown.config.num_hidden_layers == 3 and len(grown.backbone.layers) == 3
    for layer in grown.backbone.layers:
        for (name, a), b in zip(layer.state_dict().items(), source.backbone.layers[0].state_dict().values()):
            assert torch.equal(a, b), name
    assert torch.equal(grown.backbone.embeddings.word.weight, source.backbone.embeddings.word.weight)
    # copies, not shared tensors: training one layer leaves the others
    with torch.no_grad():
        grown.backbone.layers[1].qkv.weight.add_(1.0)
    assert torch.equal(grown.backbone.layers[0].qkv.weight, source.backbone.layers[0].qkv.weight)

    data["model"]["layer_map"] = [0, 1]
    with pytest.raises(ConfigError, match=r"names layers \[1\].*has 1 \(valid: 0..0\)"):
        _model_for(pretrain_recipe_from_dict(data), source.config.vocab_size, 0)
    data["model"] = {"preset": "ernie-3.0-tiny-pico-v2-zh", "init": "random", "layer_map": [0]}
    with pytest.raises(ConfigError, match="layer_map grows a pretrained model"):
        pretrain_recipe_from_dict(data)
    data["model"] = {"name": str(src_dir), "init": "pretrained", "layer_map": []}
    with pytest.raises(ConfigError, match="non-empty list"):
        pretrain_recipe_from_dict(data)
