"""PaddleNLP -> transformers conversion.

The fixtures write `.pdparams` files the way paddle.save writes a PaddleNLP 2.8 model's
state_dict (names and shapes as printed by paddlenlp 2.8.1's ErnieModel/ErnieFor* `state_dict()`,
Paddle's (in, out) Linear layout, a plain dict pickled at protocol 4 with the
`StructuredToParameterName@@` table last), using numpy only. The converted directory is loaded
with transformers' classes, and the outputs are checked against a numpy forward pass computed
straight from the Paddle-layout arrays (so a wrong transpose or name cannot cancel out).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch
import transformers
from safetensors.numpy import load_file

from nlp._common import ConfigError, DataError
from nlp.cli import main
from nlp.models._pdparams import UnsafePickleError
from nlp.models.convert_paddle import convert_paddle_checkpoint, paddle_config_to_hf

transformers.logging.set_verbosity_error()

from paddle_fixtures import (  # noqa: E402  (tests/ is on sys.path, see tests/conftest.py)
    TINY,
    paddle_backbone,
    paddle_config,
    paddle_mlm_head,
    write_paddle_dir,
)



# ------------------------------------------------------------------------------------------
# numpy reference forward, straight from the Paddle-layout arrays
# ------------------------------------------------------------------------------------------

_erf = np.vectorize(math.erf)


def _act(x, name):
    return np.maximum(x, 0) if name == "relu" else 0.5 * x * (1 + _erf(x / math.sqrt(2)))


def _ln(x, g, b, eps=1e-12):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * g + b


def reference_forward(sd: dict, cfg: dict, ids, tt, mask, prefix: str = ""):
    """Post-LN encoder as paddle.nn.TransformerEncoderLayer computes it: y = x @ W + b."""
    p = {k[len(prefix):]: v.astype(np.float64) for k, v in sd.items() if k.startswith(prefix)}
    B, T = ids.shape
    H, nh = cfg["hidden_size"], cfg["num_attention_heads"]
    d = H // nh
    x = p["embeddings.word_embeddings.weight"][ids] + p["embeddings.position_embeddings.weight"][np.arange(T)]
    x = x + p["embeddings.token_type_embeddings.weight"][tt]
    if cfg.get("use_task_id"):
        x = x + p["embeddings.task_type_embeddings.weight"][np.zeros_like(ids)]
    x = _ln(x, p["embeddings.layer_norm.weight"], p["embeddings.layer_norm.bias"])
    neg = (1.0 - mask[:, None, None, :]) * -1e9  # (B, 1, 1, T)
    for i in range(cfg["num_hidden_layers"]):
        L = f"encoder.layers.{i}."

        def lin(name, h):
            return h @ p[L + name + ".weight"] + p[L + name + ".bias"]

        q, k, v = (lin(f"self_attn.{n}_proj", x).reshape(B, T, nh, d).transpose(0, 2, 1, 3) for n in "qkv")
        s = q @ k.transpose(0, 1, 3, 2) / math.sqrt(d) + neg  # (B, nh, T, T)
        a = np.exp(s - s.max(-1, keepdims=True))
        a = a / a.sum(-1, keepdims=True)
        ctx = (a @ v).transpose(0, 2, 1, 3).reshape(B, T, H)
        x = _ln(x + lin("self_attn.out_proj", ctx), p[L + "norm1.weight"], p[L + "norm1.bias"])
        h = lin("linear2", _act(lin("linear1", x), cfg.get("hidden_act", "gelu")))
        x = _ln(x + h, p[L + "norm2.weight"], p[L + "norm2.bias"])
    pooled = np.tanh(x[:, 0] @ p["pooler.dense.weight"] + p["pooler.dense.bias"])
    return x, pooled


IDS = np.array([[1, 5, 6, 7, 8, 2, 0], [1, 11, 12, 2, 0, 0, 0]])
TT = np.array([[0, 0, 0, 1, 1, 1, 0], [0, 0, 0, 0, 0, 0, 0]])
MASK = (IDS != 0).astype(np.float64)


def _run(model, **extra):
    model.eval()
    with torch.no_grad():
        return model(input_ids=torch.from_numpy(IDS), token_type_ids=torch.from_numpy(TT),
                     attention_mask=torch.from_numpy(MASK).long(), **extra)


def _load(cls, path):
    model, info = cls.from_pretrained(path, output_loading_info=True)
    problems = {k: v for k, v in info.items() if v}
    assert not problems, problems
    return model


def _assert_close_on_tokens(got, want, atol=1e-5):
    keep = MASK.astype(bool)
    np.testing.assert_allclose(got.numpy()[keep], want[keep], atol=atol, rtol=1e-5)


# ------------------------------------------------------------------------------------------
# Conversions that must succeed
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("use_task_id, act", [(True, "gelu"), (False, "relu")])
def test_bare_ernie_model_matches_reference(tmp_path, use_task_id, act):
    rng = np.random.default_rng(1)
    cfg = paddle_config("ErnieModel", use_task_id=use_task_id, hidden_act=act)
    sd = paddle_backbone(cfg, rng)
    dst = convert_paddle_checkpoint(write_paddle_dir(tmp_path / "pd", sd, cfg), tmp_path / "hf")

    hf_cfg = json.loads((dst / "config.json").read_text())
    assert hf_cfg["model_type"] == "ernie" and hf_cfg["architectures"] == ["ErnieModel"]
    assert hf_cfg["use_task_id"] is use_task_id and hf_cfg["layer_norm_eps"] == 1e-12
    for dropped in ("fuse", "pool_act", "paddlenlp_version", "task_id"):
        assert dropped not in hf_cfg

    tensors = load_file(dst / "model.safetensors")
    assert len(tensors) == len(sd)
    np.testing.assert_array_equal(tensors["embeddings.word_embeddings.weight"], sd["embeddings.word_embeddings.weight"])
    np.testing.assert_array_equal(tensors["embeddings.LayerNorm.weight"], sd["embeddings.layer_norm.weight"])
    np.testing.assert_array_equal(tensors["encoder.layer.1.attention.self.query.weight"],
                                  sd["encoder.layers.1.self_attn.q_proj.weight"].T)
    np.testing.assert_array_equal(tensors["encoder.layer.0.attention.output.dense.weight"],
                                  sd["encoder.layers.0.self_attn.out_proj.weight"].T)
    np.testing.assert_array_equal(tensors["encoder.layer.0.intermediate.dense.weight"],
                                  sd["encoder.layers.0.linear1.weight"].T)
    np.testing.assert_array_equal(tensors["encoder.layer.0.output.dense.weight"], sd["encoder.layers.0.linear2.weight"].T)
    np.testing.assert_array_equal(tensors["encoder.layer.0.output.LayerNorm.bias"], sd["encoder.layers.0.norm2.bias"])
    np.testing.assert_array_equal(tensors["pooler.dense.weight"], sd["pooler.dense.weight"].T)

    model = _load(transformers.ErnieModel, dst)
    out = _run(model)
    hidden, pooled = reference_forward(sd, cfg, IDS, TT, MASK)
    _assert_close_on_tokens(out.last_hidden_state, hidden)
    np.testing.assert_allclose(out.pooler_output.numpy(), pooled, atol=1e-5)


@pytest.mark.parametrize("legacy", [False, True])
def test_masked_lm_matches_reference(tmp_path, legacy):
    rng = np.random.default_rng(2)
    cfg = paddle_config("ErnieForMaskedLM")
    sd = paddle_backbone(cfg, rng, "ernie.")
    sd |= paddle_mlm_head(cfg, sd, rng, legacy=legacy)
    if legacy:  # PaddleNLP < 2.5 model_config.json: arguments nested under init_args
        backbone_args = {k: v for k, v in cfg.items() if k not in ("architectures", "model_type")}
        config, name = {"init_args": [{"init_args": [backbone_args], "init_class": "ErnieModel"}],
                        "init_class": "ErnieForMaskedLM"}, "model_config.json"
    else:
        config, name = cfg, "config.json"
    dst = convert_paddle_checkpoint(write_paddle_dir(tmp_path / "pd", sd, config, config_name=name), tmp_path / "hf")

    tensors = load_file(dst / "model.safetensors")
    assert "cls.predictions.decoder.weight" not in tensors  # tied to the word embeddings
    np.testing.assert_array_equal(tensors["cls.predictions.bias"], sd["cls.predictions.decoder_bias"])
    np.testing.assert_array_equal(tensors["cls.predictions.transform.dense.weight"], sd["cls.predictions.transform.weight"].T)
    assert not any(k.startswith("ernie.pooler") for k in tensors)  # transformers' MLM has no pooler

    model = _load(transformers.ErnieForMaskedLM, dst)
    assert model.cls.predictions.decoder.weight.data_ptr() == model.ernie.embeddings.word_embeddings.weight.data_ptr()
    logits = _run(model).logits
    hidden, _ = reference_forward(sd, cfg, IDS, TT, MASK, "ernie.")
    t = _ln(_act(hidden @ sd["cls.predictions.transform.weight"] + sd["cls.predictions.transform.bias"], "gelu"),
            sd["cls.predictions.layer_norm.weight"], sd["cls.predictions.layer_norm.bias"])
    want = t @ sd["ernie.embeddings.word_embeddings.weight"].T.astype(np.float64) + sd["cls.predictions.decoder_bias"]
    _assert_close_on_tokens(logits, want, atol=2e-5)


def test_untied_decoder_is_kept(tmp_path):
    rng = np.random.default_rng(3)
    cfg = paddle_config("ErnieForMaskedLM")
    sd = paddle_backbone(cfg, rng, "ernie.")
    sd |= paddle_mlm_head(cfg, sd, rng)
    sd["cls.predictions.decoder.weight"] = sd["cls.predictions.decoder.weight"] + 1
    dst = convert_paddle_checkpoint(write_paddle_dir(tmp_path / "pd", sd, cfg), tmp_path / "hf")
    assert json.loads((dst / "config.json").read_text())["tie_word_embeddings"] is False
    model = _load(transformers.ErnieForMaskedLM, dst)
    np.testing.assert_array_equal(model.cls.predictions.decoder.weight.detach().numpy(),
                                  sd["cls.predictions.decoder.weight"])


def test_sequence_classification_matches_reference(tmp_path):
    rng = np.random.default_rng(4)
    cfg = paddle_config("ErnieForSequenceClassification", use_task_id=False,
                        id2label={"0": "neg", "1": "neu", "2": "pos"}, label2id={"neg": 0, "neu": 1, "pos": 2})
    sd = paddle_backbone(cfg, rng, "ernie.")
    sd["classifier.weight"] = rng.standard_normal((16, 3)).astype(np.float32)
    sd["classifier.bias"] = rng.standard_normal(3).astype(np.float32)
    dst = convert_paddle_checkpoint(write_paddle_dir(tmp_path / "pd", sd, cfg), tmp_path / "hf")

    model = _load(transformers.ErnieForSequenceClassification, dst)
    assert model.config.id2label == {0: "neg", 1: "neu", 2: "pos"}
    np.testing.assert_array_equal(model.classifier.weight.detach().numpy(), sd["classifier.weight"].T)
    _, pooled = reference_forward(sd, cfg, IDS, TT, MASK, "ernie.")
    want = pooled @ sd["classifier.weight"] + sd["classifier.bias"]
    np.testing.assert_allclose(_run(model).logits.numpy(), want, atol=1e-5)


def test_legacy_num_classes_and_inferred_head(tmp_path):
    """A model_config.json without architectures: the head comes from the keys, labels from num_classes."""
    rng = np.random.default_rng(5)
    cfg = paddle_config("x", use_task_id=False)
    sd = paddle_backbone(cfg, rng, "ernie.")
    sd["classifier.weight"], sd["classifier.bias"] = np.ones((16, 2), np.float32), np.zeros(2, np.float32)
    backbone_args = {k: v for k, v in cfg.items() if k not in ("architectures", "model_type")}
    legacy = {"init_args": [{"init_args": [backbone_args], "init_class": "ErnieModel"}], "num_classes": 2}
    dst = convert_paddle_checkpoint(write_paddle_dir(tmp_path / "pd", sd, legacy, config_name="model_config.json"),
                                    tmp_path / "hf")
    hf_cfg = json.loads((dst / "config.json").read_text())
    assert hf_cfg["architectures"] == ["ErnieForSequenceClassification"]
    assert len(hf_cfg["id2label"]) == 2
    _load(transformers.ErnieForSequenceClassification, dst)


@pytest.mark.parametrize("arch, cls", [
    ("ErnieForTokenClassification", transformers.ErnieForTokenClassification),
    ("ErnieForQuestionAnswering", transformers.ErnieForQuestionAnswering),
])
def test_token_and_span_heads(tmp_path, arch, cls):
    rng = np.random.default_rng(6)
    width = 2 if "Question" in arch else 5
    cfg = paddle_config("ErnieForSequenceClassification", num_labels=3)  # a wrong record, fixed below
    sd = paddle_backbone(cfg, rng, "ernie.")
    sd["classifier.weight"] = rng.standard_normal((16, width)).astype(np.float32)
    sd["classifier.bias"] = rng.standard_normal(width).astype(np.float32)
    cfg.pop("num_labels")
    if "Token" in arch:
        cfg["id2label"] = {str(i): f"T{i}" for i in range(width)}
    src = write_paddle_dir(tmp_path / "pd", sd, cfg)
    dst = convert_paddle_checkpoint(src, tmp_path / "hf", architecture=arch)
    model = _load(cls, dst)
    hidden, _ = reference_forward(sd, cfg, IDS, TT, MASK, "ernie.")
    want = hidden @ sd["classifier.weight"] + sd["classifier.bias"]
    out = _run(model)
    if "Question" in arch:
        _assert_close_on_tokens(out.start_logits, want[..., 0])
        _assert_close_on_tokens(out.end_logits, want[..., 1])
    else:
        _assert_close_on_tokens(out.logits, want)


def test_pretraining_head(tmp_path):
    rng = np.random.default_rng(7)
    cfg = paddle_config("ErnieForPretraining")  # PaddleNLP's spelling
    sd = paddle_backbone(cfg, rng, "ernie.")
    sd |= paddle_mlm_head(cfg, sd, rng)
    sd["cls.seq_relationship.weight"] = rng.standard_normal((16, 2)).astype(np.float32)
    sd["cls.seq_relationship.bias"] = rng.standard_normal(2).astype(np.float32)
    dst = convert_paddle_checkpoint(write_paddle_dir(tmp_path / "pd", sd, cfg), tmp_path / "hf")
    assert json.loads((dst / "config.json").read_text())["architectures"] == ["ErnieForPreTraining"]
    model = _load(transformers.ErnieForPreTraining, dst)
    _, pooled = reference_forward(sd, cfg, IDS, TT, MASK, "ernie.")
    want = pooled @ sd["cls.seq_relationship.weight"] + sd["cls.seq_relationship.bias"]
    np.testing.assert_allclose(_run(model).seq_relationship_logits.numpy(), want, atol=1e-5)


def test_bert_model_type(tmp_path):
    """PaddleNLP's BertModel shares the layout (prefix `bert.`); BERT keeps the config's eps."""
    rng = np.random.default_rng(8)
    cfg = paddle_config("BertForMaskedLM", model_type="bert", use_task_id=False, layer_norm_eps=1e-5)
    for key in ("use_task_id", "task_type_vocab_size", "task_id"):
        cfg.pop(key)
    sd = {k.replace("ernie.", "bert.", 1): v for k, v in paddle_backbone(cfg, rng, "ernie.").items()}
    sd |= paddle_mlm_head(cfg, {"ernie.embeddings.word_embeddings.weight": sd["bert.embeddings.word_embeddings.weight"]}, rng)
    dst = convert_paddle_checkpoint(write_paddle_dir(tmp_path / "pd", sd, cfg), tmp_path / "hf")
    hf_cfg = json.loads((dst / "config.json").read_text())
    assert hf_cfg["model_type"] == "bert" and hf_cfg["layer_norm_eps"] == 1e-5
    model = _load(transformers.BertForMaskedLM, dst)
    assert model.config.layer_norm_eps == 1e-5
    _run(model)


def test_ernie_eps_is_the_one_paddle_really_uses(tmp_path):
    """paddlenlp 2.8.1's ErniePretrainedModel._init_weights forces every LayerNorm to 1e-12."""
    hf = paddle_config_to_hf(paddle_config("ErnieModel", layer_norm_eps=1e-5))
    assert hf["layer_norm_eps"] == 1e-12


def test_bfloat16_weights(tmp_path):
    """Paddle saves bfloat16 parameters as uint16 bit patterns."""
    rng = np.random.default_rng(9)
    cfg = paddle_config("ErnieModel", use_task_id=False)
    sd32 = paddle_backbone(cfg, rng)
    bf16 = {k: torch.from_numpy(v).to(torch.bfloat16) for k, v in sd32.items()}
    sd = {k: t.view(torch.int16).numpy().view(np.uint16) for k, t in bf16.items()}
    dst = convert_paddle_checkpoint(write_paddle_dir(tmp_path / "pd", sd, cfg), tmp_path / "hf")
    model = _load(transformers.ErnieModel, dst)
    got = model.encoder.layer[0].intermediate.dense.weight
    assert got.dtype == torch.bfloat16
    assert torch.equal(got, bf16["encoder.layers.0.linear1.weight"].t())


def test_tokenizer_files_load_in_transformers(tmp_path):
    rng = np.random.default_rng(10)
    cfg = paddle_config("ErnieModel")
    dst = convert_paddle_checkpoint(write_paddle_dir(tmp_path / "pd", paddle_backbone(cfg, rng), cfg), tmp_path / "hf")
    assert (dst / "vocab.txt").read_text(encoding="utf-8") == (tmp_path / "pd" / "vocab.txt").read_text(encoding="utf-8")
    tok = transformers.BertTokenizerFast.from_pretrained(dst)
    enc = tok("你好世界")
    assert enc["input_ids"] == [1, 5, 6, 7, 8, 2]
    assert tok.convert_ids_to_tokens(enc["input_ids"]) == ["[CLS]", "你", "好", "世", "界", "[SEP]"]
    assert tok.model_max_length == 32
    auto = transformers.AutoTokenizer.from_pretrained(dst)
    assert auto("中国人")["input_ids"] == [1, 11, 12, 13, 2]

    from nlp.tokenizer import load_tokenizer

    ours = load_tokenizer(dst)
    assert ours("你好世界")["input_ids"] == enc["input_ids"]
    assert ours.model_max_length == 32


def test_flat_legacy_config():
    """PaddleNLP < 2.5 bare-model model_config.json: the arguments at top level plus init_class."""
    legacy = {k: v for k, v in paddle_config("x").items() if k not in ("architectures", "model_type")}
    hf = paddle_config_to_hf({**legacy, "init_class": "ErnieModel"})
    assert hf["architectures"] == ["ErnieModel"] and hf["model_type"] == "ernie"
    assert hf["vocab_size"] == TINY["vocab_size"] and hf["use_task_id"] is True
    assert "init_class" not in hf and "fuse" not in hf


def test_cli_converts(tmp_path, capsys):
    rng = np.random.default_rng(11)
    cfg = paddle_config("ErnieModel")
    src = write_paddle_dir(tmp_path / "pd", paddle_backbone(cfg, rng), cfg)
    assert main(["convert", "paddle", str(src), str(tmp_path / "hf")]) == 0
    assert "converted" in capsys.readouterr().out
    assert (tmp_path / "hf" / "model.safetensors").is_file()
    assert main(["convert", "paddle", str(src), str(tmp_path / "hf")]) == 2  # exists
    assert "--overwrite" in capsys.readouterr().err
    assert main(["convert", "paddle", str(src), str(tmp_path / "hf"), "--overwrite"]) == 0


# ------------------------------------------------------------------------------------------
# Refusals
# ------------------------------------------------------------------------------------------


@pytest.fixture
def good_src(tmp_path):
    cfg = paddle_config("ErnieForSequenceClassification", num_labels=2)
    sd = paddle_backbone(cfg, np.random.default_rng(12), "ernie.")
    sd["classifier.weight"], sd["classifier.bias"] = np.ones((16, 2), np.float32), np.zeros(2, np.float32)
    return tmp_path / "pd", sd, cfg


def _no_leftovers(tmp_path):
    assert not (tmp_path / "hf").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".hf.")]


def test_unknown_keys_are_listed(tmp_path, good_src):
    src, sd, cfg = good_src
    sd["ernie.encoder.layers.0.self_attn.qkv_proj.weight"] = np.zeros((16, 48), np.float32)
    sd["ernie.encoder.layers.2.linear1.bias"] = np.zeros(24, np.float32)  # beyond num_hidden_layers
    sd["linear_start.weight"] = np.zeros((16, 1), np.float32)  # a UIE head
    write_paddle_dir(src, sd, cfg)
    with pytest.raises(DataError) as err:
        convert_paddle_checkpoint(src, tmp_path / "hf")
    for key in ("qkv_proj.weight", "layers.2.linear1.bias", "linear_start.weight"):
        assert key in str(err.value)
    _no_leftovers(tmp_path)


def test_missing_keys_are_listed(tmp_path, good_src):
    src, sd, cfg = good_src
    del sd["ernie.encoder.layers.1.norm2.bias"], sd["classifier.bias"]
    write_paddle_dir(src, sd, cfg)
    with pytest.raises(DataError, match=r"missing parameters: .*classifier\.bias.*encoder\.layer\.1\.output\.LayerNorm\.bias"):
        convert_paddle_checkpoint(src, tmp_path / "hf")
    _no_leftovers(tmp_path)


def test_shape_mismatch_against_config(tmp_path, good_src):
    src, sd, cfg = good_src
    write_paddle_dir(src, sd, {**cfg, "intermediate_size": 32, "vocab_size": 41})
    with pytest.raises(DataError, match="shape mismatches") as err:
        convert_paddle_checkpoint(src, tmp_path / "hf")
    assert "linear1.weight: (16, 24)" in str(err.value) and "word_embeddings" in str(err.value)
    _no_leftovers(tmp_path)


def test_task_embeddings_without_use_task_id_is_an_error(tmp_path, good_src):
    src, sd, cfg = good_src
    sd["ernie.embeddings.task_type_embeddings.weight"] = np.zeros((3, 16), np.float32)
    write_paddle_dir(src, sd, {**cfg, "use_task_id": False})
    with pytest.raises(DataError, match="task_type_embeddings"):
        convert_paddle_checkpoint(src, tmp_path / "hf")


def test_missing_config(tmp_path, good_src):
    src, sd, cfg = good_src
    write_paddle_dir(src, sd, cfg)
    (src / "config.json").unlink()
    with pytest.raises(ConfigError, match="model_config.json"):
        convert_paddle_checkpoint(src, tmp_path / "hf")
    _no_leftovers(tmp_path)


def test_missing_weights_and_source(tmp_path, good_src):
    src, sd, cfg = good_src
    write_paddle_dir(src, sd, cfg)
    (src / "model_state.pdparams").rename(src / "best.pdparams")
    with pytest.raises(DataError, match="best.pdparams"):
        convert_paddle_checkpoint(src, tmp_path / "hf")
    with pytest.raises(DataError, match="not a directory"):
        convert_paddle_checkpoint(tmp_path / "nowhere", tmp_path / "hf")


def test_truncated_weights_name_the_file(tmp_path, good_src):
    src, sd, cfg = good_src
    write_paddle_dir(src, sd, cfg)
    weights = src / "model_state.pdparams"
    weights.write_bytes(weights.read_bytes()[:1000])
    with pytest.raises(DataError, match="model_state.pdparams.*truncated"):
        convert_paddle_checkpoint(src, tmp_path / "hf")
    _no_leftovers(tmp_path)


class _Evil:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_malicious_pickle_is_refused(tmp_path, good_src):
    src, sd, cfg = good_src
    marker = tmp_path / "pwned"
    write_paddle_dir(src, {**sd, "classifier.bias": _Evil(marker)}, cfg)
    with pytest.raises(UnsafePickleError, match="system"):
        convert_paddle_checkpoint(src, tmp_path / "hf")
    assert not marker.exists()
    _no_leftovers(tmp_path)


def test_bad_config_values(tmp_path, good_src):
    with pytest.raises(ConfigError, match="Did you mean 'ErnieForQuestionAnswering'"):
        src, sd, cfg = good_src
        write_paddle_dir(src, sd, cfg)
        convert_paddle_checkpoint(src, tmp_path / "hf", architecture="ErnieForQuestionAnswring")
    with pytest.raises(ConfigError, match="pool_act"):
        paddle_config_to_hf(paddle_config("ErnieModel", pool_act="relu"))
    with pytest.raises(ConfigError, match="model_type"):
        paddle_config_to_hf(paddle_config("GPTModel", model_type="gpt"))


def test_overwrite_replaces_atomically(tmp_path, good_src):
    src, sd, cfg = good_src
    write_paddle_dir(src, sd, cfg)
    dst = tmp_path / "hf"
    dst.mkdir()
    (dst / "stale.bin").write_bytes(b"old")
    with pytest.raises(DataError, match="already exists"):
        convert_paddle_checkpoint(src, dst)
    convert_paddle_checkpoint(src, dst, overwrite=True)
    assert not (dst / "stale.bin").exists() and (dst / "model.safetensors").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hf", "pd"]


# ------------------------------------------------------------------------------------------
# Against real PaddleNLP (optional: $NLP_PADDLE_PYTHON, a Python with paddlepaddle + paddlenlp)
# ------------------------------------------------------------------------------------------

PADDLE_PY = Path(os.environ.get("NLP_PADDLE_PYTHON", str(Path.home() / ".cache" / "nlp-paddle-venv" / "bin" / "python")))

_PADDLE_SCRIPT = r'''
import sys, numpy as np, paddle
from paddlenlp.transformers import (ErnieConfig, ErnieModel, ErnieForMaskedLM, ErnieForPretraining,
    ErnieForSequenceClassification, ErnieForTokenClassification, ErnieForQuestionAnswering)
out = sys.argv[1]
paddle.seed(0)
ids = np.array(%(ids)r, dtype="int64"); tt = np.array(%(tt)r, dtype="int64")
res = {}
for name, cls, task, act in [("base", ErnieModel, True, "gelu"), ("base_notask", ErnieModel, False, "relu"),
        ("mlm", ErnieForMaskedLM, True, "gelu"), ("pre", ErnieForPretraining, False, "gelu"),
        ("cls", ErnieForSequenceClassification, True, "gelu"), ("tok", ErnieForTokenClassification, False, "gelu"),
        ("qa", ErnieForQuestionAnswering, True, "gelu")]:
    cfg = ErnieConfig(vocab_size=40, hidden_size=16, num_hidden_layers=2, num_attention_heads=4,
                      intermediate_size=24, max_position_embeddings=32, type_vocab_size=4, use_task_id=task,
                      task_type_vocab_size=3, num_labels=3, hidden_act=act)
    m = cls(cfg)
    m.eval()
    for k, v in m.state_dict().items():  # random LayerNorms and biases too
        v.set_value(paddle.randn(v.shape, dtype=v.dtype) * 0.3 + (1.0 if "norm" in k and k.endswith("weight") else 0.0))
    m.save_pretrained(f"{out}/{name}")
    o = m(paddle.to_tensor(ids), token_type_ids=paddle.to_tensor(tt), return_dict=False)
    for i, t in enumerate(o if isinstance(o, (tuple, list)) else (o,)):
        res[f"{name}_{i}"] = t.numpy()
np.savez(f"{out}/outputs.npz", **res)
'''


@pytest.mark.skipif(not PADDLE_PY.exists(), reason="no Python with paddlepaddle + paddlenlp: set $NLP_PADDLE_PYTHON to one")
def test_against_real_paddlenlp(tmp_path):
    """Models saved by paddlenlp's own save_pretrained convert and give paddle's outputs (<= 1e-5)."""
    script = tmp_path / "gen.py"
    script.write_text(_PADDLE_SCRIPT % {"ids": IDS.tolist(), "tt": TT.tolist()})
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    proc = subprocess.run([str(PADDLE_PY), str(script), str(tmp_path / "pd")], capture_output=True, text=True,
                          env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    ref = np.load(tmp_path / "pd" / "outputs.npz")
    classes = {"base": transformers.ErnieModel, "base_notask": transformers.ErnieModel,
               "mlm": transformers.ErnieForMaskedLM, "pre": transformers.ErnieForPreTraining,
               "cls": transformers.ErnieForSequenceClassification,
               "tok": transformers.ErnieForTokenClassification, "qa": transformers.ErnieForQuestionAnswering}
    keep = MASK.astype(bool)
    for name, cls in classes.items():
        dst = convert_paddle_checkpoint(tmp_path / "pd" / name, tmp_path / "hf" / name)
        # Paddle derives its attention mask from pad_token_id (0): the same as MASK.
        out = _run(_load(cls, dst))
        if name.startswith("base"):
            got = [out.last_hidden_state, out.pooler_output]
        elif name == "pre":
            got = [out.prediction_logits, out.seq_relationship_logits]
        elif name == "qa":
            got = [out.start_logits, out.end_logits]
        else:
            got = [out.logits]
        for i, tensor in enumerate(got):
            want = ref[f"{name}_{i}"].reshape(tensor.shape)
            g = tensor.numpy()
            if g.ndim >= 2 and g.shape[:2] == IDS.shape:
                g, want = g[keep], want[keep]
            np.testing.assert_allclose(g, want, atol=1e-5, rtol=1e-5, err_msg=f"{name} output {i}")


# ------------------------------------------------------------------------------------------
# The converted directory loads into this toolkit's own encoder too
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("use_task_id", [True, False])
def test_nlp_ernie_model_loads_converted_dir(tmp_path, use_task_id):
    from nlp.models import ErnieModel

    rng = np.random.default_rng(13)
    cfg = paddle_config("ErnieModel", use_task_id=use_task_id)
    sd = paddle_backbone(cfg, rng)
    dst = convert_paddle_checkpoint(write_paddle_dir(tmp_path / "pd", sd, cfg), tmp_path / "hf")
    model = ErnieModel.from_pretrained(dst)
    assert model.config.use_task_id is use_task_id and model.config.layer_norm_eps == 1e-12
    out = _run(model)
    hidden, pooled = reference_forward(sd, cfg, IDS, TT, MASK)
    _assert_close_on_tokens(out.last_hidden_state, hidden)
    np.testing.assert_allclose(out.pooler_output.numpy(), pooled, atol=1e-5)


def test_nlp_ernie_for_masked_lm_loads_converted_dir(tmp_path, caplog):
    from nlp.models import ErnieForMaskedLM

    rng = np.random.default_rng(14)
    cfg = paddle_config("ErnieForMaskedLM")
    sd = paddle_backbone(cfg, rng, "ernie.")
    sd |= paddle_mlm_head(cfg, sd, rng)
    dst = convert_paddle_checkpoint(write_paddle_dir(tmp_path / "pd", sd, cfg), tmp_path / "hf")
    model = ErnieForMaskedLM.from_pretrained(dst)
    want = _run(_load(transformers.ErnieForMaskedLM, dst)).logits
    torch.testing.assert_close(_run(model).logits, want, atol=1e-5, rtol=1e-5)


def test_plugs_into_the_hub_converter_registry(tmp_path, good_src):
    """nlp.auto registers this converter with the hub, which hands it an empty directory."""
    from nlp.hub.convert import convert_once, register_converter

    src, sd, cfg = good_src
    write_paddle_dir(src, sd, cfg)
    register_converter("paddle-under-test", convert_paddle_checkpoint)
    dst = convert_once("paddle-under-test", src, tmp_path / "snap")
    _load(transformers.ErnieForSequenceClassification, dst)
    assert (dst / "vocab.txt").is_file()


# ------------------------------------------------------------------------------------------
# UIE (PaddleNLP's `UIE`: ERNIE + linear_start / linear_end) -> nlp's ErnieForInformationExtraction
# ------------------------------------------------------------------------------------------


def _uie_source(tmp_path, *, layout: str = "2.8", seed: int = 21):
    """A UIE directory as paddlenlp 2.8 saves it ("2.8"), as PaddleNLP < 2.4.5 did ("legacy":
    model_config.json with init_class, the encoder named `encoder`), or with no architecture."""
    from paddle_fixtures import paddle_uie_heads

    rng = np.random.default_rng(seed)
    cfg = paddle_config("UIE")
    sd = paddle_backbone(cfg, rng, "ernie.") | paddle_uie_heads(cfg, rng)
    config: dict = dict(cfg)
    name = "config.json"
    state = sd
    if layout == "legacy":
        backbone = {k: v for k, v in cfg.items() if k not in ("architectures", "model_type")}
        config, name = {"init_args": [{"init_args": [backbone], "init_class": "ErnieModel"}],
                        "init_class": "UIE"}, "model_config.json"
        state = {("encoder." + k[len("ernie."):] if k.startswith("ernie.") else k): v for k, v in sd.items()}
    elif layout == "no-architecture":
        config.pop("architectures")
    return write_paddle_dir(tmp_path / "pd", state, config, config_name=name), sd, cfg


def _uie_reference(sd, cfg):
    """Pointer probabilities from the Paddle-layout arrays: sigmoid(x @ W + b) per token."""
    hidden, _ = reference_forward(sd, cfg, IDS, TT, MASK, prefix="ernie.")
    return tuple(1 / (1 + np.exp(-(hidden @ sd[f"{h}.weight"].astype(np.float64) + sd[f"{h}.bias"])[..., 0]))
                 for h in ("linear_start", "linear_end"))


@pytest.mark.parametrize("layout", ["2.8", "legacy", "no-architecture"])
def test_uie_converts_and_matches_reference(tmp_path, layout):
    from nlp.tasks.extraction import ErnieForInformationExtraction

    src, sd, cfg = _uie_source(tmp_path, layout=layout)
    dst = convert_paddle_checkpoint(src, tmp_path / "hf")
    hf_cfg = json.loads((dst / "config.json").read_text())
    assert hf_cfg["architectures"] == ["ErnieForInformationExtraction"] and hf_cfg["use_task_id"] is True
    tensors = load_file(dst / "model.safetensors")
    assert not any("pooler" in k for k in tensors)  # UIE never reads the pooler
    np.testing.assert_array_equal(tensors["linear_start.weight"], sd["linear_start.weight"].T)  # (1, H)
    np.testing.assert_array_equal(tensors["linear_end.bias"], sd["linear_end.bias"])
    np.testing.assert_array_equal(tensors["ernie.encoder.layer.1.attention.self.key.weight"],
                                  sd["ernie.encoder.layers.1.self_attn.k_proj.weight"].T)

    model = ErnieForInformationExtraction.from_pretrained(dst)
    out = _run(model)
    for got, want in zip((out.start_prob, out.end_prob), _uie_reference(sd, cfg)):
        _assert_close_on_tokens(got, want)


def test_uie_early_taskflow_config_sizes_come_from_the_weights(tmp_path):
    """Early Taskflow model_config.json: `sent_type_vocab_size`, no intermediate_size or vocab
    size. PaddleNLP's defaults (16 types, 3072) would not fit; the weights' shapes do."""
    from nlp.tasks.extraction import ErnieForInformationExtraction

    src, sd, cfg = _uie_source(tmp_path, layout="legacy")
    legacy = json.loads((src / "model_config.json").read_text())
    inner = legacy["init_args"][0]["init_args"][0]
    inner["sent_type_vocab_size"] = inner.pop("type_vocab_size")
    for field in ("intermediate_size", "vocab_size", "num_hidden_layers"):
        del inner[field]
    (src / "model_config.json").write_text(json.dumps(legacy))
    dst = convert_paddle_checkpoint(src, tmp_path / "hf")
    hf_cfg = json.loads((dst / "config.json").read_text())
    assert {k: hf_cfg[k] for k in ("type_vocab_size", "intermediate_size", "vocab_size", "num_hidden_layers")} == \
        {k: TINY[k] for k in ("type_vocab_size", "intermediate_size", "vocab_size", "num_hidden_layers")}
    assert "sent_type_vocab_size" not in hf_cfg
    out = _run(ErnieForInformationExtraction.from_pretrained(dst))
    _assert_close_on_tokens(out.end_prob, _uie_reference(sd, cfg)[1])


def test_uie_architecture_flag_on_the_cli(tmp_path, capsys):
    src, _, _ = _uie_source(tmp_path, layout="no-architecture")
    # a `classifier`-free config without architectures: --architecture UIE (PaddleNLP's class name)
    assert main(["convert", "paddle", str(src), str(tmp_path / "hf"), "--architecture", "UIE"]) == 0
    assert json.loads((tmp_path / "hf" / "config.json").read_text())["architectures"] == \
        ["ErnieForInformationExtraction"]
    assert "converted" in capsys.readouterr().out


def test_uie_head_on_another_checkpoint_is_refused(tmp_path):
    """--architecture UIE on a classifier checkpoint names the keys it cannot place."""
    rng = np.random.default_rng(22)
    cfg = paddle_config("ErnieForSequenceClassification", num_labels=2)
    sd = paddle_backbone(cfg, rng, "ernie.")
    sd["classifier.weight"], sd["classifier.bias"] = np.zeros((16, 2), np.float32), np.zeros(2, np.float32)
    with pytest.raises(DataError, match=r"ErnieForInformationExtraction.*classifier\.bias.*missing parameters: "
                                        r"linear_end\.bias"):
        convert_paddle_checkpoint(write_paddle_dir(tmp_path / "pd", sd, cfg), tmp_path / "hf", architecture="UIE")
    assert not (tmp_path / "hf").exists()


@pytest.mark.parametrize("cls", ["UIEM", "UIEX"])
def test_uie_m_and_x_are_refused_by_name(tmp_path, cls):
    with pytest.raises(ConfigError, match=rf"{cls} is an ERNIE-.* encoder.*architecture='UIE'"):
        paddle_config_to_hf(paddle_config(cls))


def test_uie_paddle_source_through_the_hub_converters(tmp_path, isolated_hub, no_network):
    """A registered name whose source is a Paddle UIE directory: converted once on arrival by
    nlp.auto.CONVERTERS, then loaded like any model directory."""
    import nlp
    from nlp.auto import resolve
    from nlp.tasks.extraction import ErnieForInformationExtraction

    src, sd, cfg = _uie_source(tmp_path)
    nlp.hub.register_card({"name": "tiny-paddle-uie", "architecture": "ernie", "license": "apache-2.0",
                           "sources": [{"kind": "local", "path": str(src), "format": "paddle"}]})
    path = resolve("tiny-paddle-uie")
    assert path != src and (path / "model.safetensors").is_file() and (path / "vocab.txt").is_file()
    out = _run(ErnieForInformationExtraction.from_pretrained(path))
    _assert_close_on_tokens(out.start_prob, _uie_reference(sd, cfg)[0])
    # and the task's pipeline takes the name, tokenizer included (position_prob 0: every token passes)
    ie = nlp.pipeline("information-extraction", model="tiny-paddle-uie", schema=["中国", "人"], position_prob=0.0)
    (spans,) = ie(["你好世界"])
    assert set(spans) == {"中国", "人"} and all(0 <= s["start"] < s["end"] <= 4 for v in spans.values() for s in v)


_PADDLE_UIE_SCRIPT = r'''
import sys, numpy as np, paddle
from paddlenlp.transformers import ErnieConfig, UIE
out = sys.argv[1]
paddle.seed(0)
ids = np.array(%(ids)r, dtype="int64"); tt = np.array(%(tt)r, dtype="int64")
mask = (ids != 0).astype("int64")
pos = np.tile(np.arange(ids.shape[1], dtype="int64"), (ids.shape[0], 1))
cfg = ErnieConfig(vocab_size=40, hidden_size=16, num_hidden_layers=2, num_attention_heads=4, intermediate_size=24,
                  max_position_embeddings=32, type_vocab_size=4, use_task_id=True, task_type_vocab_size=3)
m = UIE(cfg)
m.eval()
for k, v in m.state_dict().items():  # random LayerNorms, biases and heads too
    v.set_value(paddle.randn(v.shape, dtype=v.dtype) * 0.3 + (1.0 if "norm" in k and k.endswith("weight") else 0.0))
m.save_pretrained(out)
# the inputs Taskflow's information_extraction feeds: ids, token types, positions, a 0/1 mask
start, end = m(input_ids=paddle.to_tensor(ids), token_type_ids=paddle.to_tensor(tt),
               position_ids=paddle.to_tensor(pos), attention_mask=paddle.to_tensor(mask))
np.savez(f"{out}/outputs.npz", start_prob=start.numpy(), end_prob=end.numpy())
'''


@pytest.mark.skipif(not PADDLE_PY.exists(), reason="no Python with paddlepaddle + paddlenlp: set $NLP_PADDLE_PYTHON to one")
def test_uie_against_real_paddlenlp(tmp_path):
    """A UIE that paddlenlp saves itself converts and gives its pointer probabilities (<= 1e-5)."""
    from nlp.tasks.extraction import ErnieForInformationExtraction

    script = tmp_path / "gen_uie.py"
    script.write_text(_PADDLE_UIE_SCRIPT % {"ids": IDS.tolist(), "tt": TT.tolist()})
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    proc = subprocess.run([str(PADDLE_PY), str(script), str(tmp_path / "pd")], capture_output=True, text=True,
                          env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    ref = np.load(tmp_path / "pd" / "outputs.npz")
    dst = convert_paddle_checkpoint(tmp_path / "pd", tmp_path / "hf")  # architecture from its config.json
    out = _run(ErnieForInformationExtraction.from_pretrained(dst))
    keep = MASK.astype(bool)  # real tokens: what a padding row holds is no one's output
    for name in ("start_prob", "end_prob"):
        diff = np.abs(getattr(out, name).numpy() - ref[name])[keep]
        assert diff.max() <= 1e-5, (name, float(diff.max()))


@pytest.mark.parametrize("key, value", [("vocab_size", "x"), ("num_hidden_layers", None), ("hidden_size", 0),
                                        ("intermediate_size", True)])
def test_a_size_in_the_config_that_is_not_a_count_is_refused_naming_it(tmp_path, key, value):
    # "x" used to end in a bare int() ValueError, null in a TypeError
    rng = np.random.default_rng(5)
    cfg = paddle_config("ErnieModel")
    sd = paddle_backbone(cfg, rng, "ernie.")
    src = write_paddle_dir(tmp_path / "pd", sd, {**cfg, key: value})
    with pytest.raises(ConfigError, match=rf"config gives {key}={value!r}; it must be a whole number >= 1 "
                                          rf"\(fix {key} in its config.json / model_config.json\)"):
        convert_paddle_checkpoint(src, tmp_path / "hf")
    assert not (tmp_path / "hf").exists()
