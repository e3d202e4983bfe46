"""Builders of PaddleNLP-format model directories, written with numpy only.

Names and shapes are those paddlenlp 2.8.1's ErnieModel/ErnieFor* `state_dict()` print, in
Paddle's (in, out) Linear layout, pickled as paddle.save does (a plain dict at protocol 4 with the
`StructuredToParameterName@@` table last). Shared by the converter's tests and the Auto/hub tests.
"""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import numpy as np

from nlp.models._pdparams import NAME_TABLE_KEY

TINY = dict(vocab_size=40, hidden_size=16, num_hidden_layers=2, num_attention_heads=4, intermediate_size=24,
            max_position_embeddings=32, type_vocab_size=4, task_type_vocab_size=3, pad_token_id=0)
VOCAB = ["[PAD]", "[CLS]", "[SEP]", "[MASK]", "[UNK]", "你", "好", "世", "界", "的", "是", "中", "国", "人"]
VOCAB += [f"[unused{i}]" for i in range(TINY["vocab_size"] - len(VOCAB))]


# ------------------------------------------------------------------------------------------
# Paddle-layout state dicts
# ------------------------------------------------------------------------------------------


def paddle_backbone(cfg: dict, rng: np.random.Generator, prefix: str = "") -> dict[str, np.ndarray]:
    """ErnieModel.state_dict() names and Paddle shapes (Linear weights are (in, out))."""
    H, I = cfg["hidden_size"], cfg["intermediate_size"]

    def w(*shape):
        return (rng.standard_normal(shape) * 0.3).astype(np.float32)

    def norm(name):  # LayerNorm: not ones/zeros, so a swapped weight/bias would show
        return {f"{name}.weight": 1 + w(H), f"{name}.bias": w(H)}

    sd = {
        "embeddings.word_embeddings.weight": w(cfg["vocab_size"], H),
        "embeddings.position_embeddings.weight": w(cfg["max_position_embeddings"], H),
        "embeddings.token_type_embeddings.weight": w(cfg["type_vocab_size"], H),
    }
    if cfg.get("use_task_id"):
        sd["embeddings.task_type_embeddings.weight"] = w(cfg["task_type_vocab_size"], H)
    sd.update(norm("embeddings.layer_norm"))
    for i in range(cfg["num_hidden_layers"]):
        L = f"encoder.layers.{i}"
        for proj in ("q_proj", "k_proj", "v_proj", "out_proj"):
            sd[f"{L}.self_attn.{proj}.weight"] = w(H, H)
            sd[f"{L}.self_attn.{proj}.bias"] = w(H)
        sd[f"{L}.linear1.weight"], sd[f"{L}.linear1.bias"] = w(H, I), w(I)
        sd[f"{L}.linear2.weight"], sd[f"{L}.linear2.bias"] = w(I, H), w(H)
        sd.update(norm(f"{L}.norm1"))
        sd.update(norm(f"{L}.norm2"))
    sd["pooler.dense.weight"], sd["pooler.dense.bias"] = w(H, H), w(H)
    return {prefix + k: v for k, v in sd.items()}


def paddle_mlm_head(cfg: dict, sd: dict, rng: np.random.Generator, *, legacy: bool = False) -> dict:
    """ErnieForMaskedLM's `cls.predictions.*`, as paddlenlp 2.8.1 saves it (or < 2.5 if legacy)."""
    H, V = cfg["hidden_size"], cfg["vocab_size"]
    bias = (rng.standard_normal(V) * 0.3).astype(np.float32)
    head = {
        "cls.predictions.transform.weight": (rng.standard_normal((H, H)) * 0.3).astype(np.float32),
        "cls.predictions.transform.bias": (rng.standard_normal(H) * 0.3).astype(np.float32),
        "cls.predictions.layer_norm.weight": (1 + rng.standard_normal(H) * 0.3).astype(np.float32),
        "cls.predictions.layer_norm.bias": (rng.standard_normal(H) * 0.3).astype(np.float32),
    }
    word = sd["ernie.embeddings.word_embeddings.weight"]
    if legacy:  # PaddleNLP < 2.5: decoder_weight (tied) + decoder_bias
        head |= {"cls.predictions.decoder_weight": word.copy(), "cls.predictions.decoder_bias": bias}
    else:  # 2.8: decoder_bias first (registered first), decoder.weight tied, decoder.bias alias
        head = {"cls.predictions.decoder_bias": bias, **head,
                "cls.predictions.decoder.weight": word.copy(), "cls.predictions.decoder.bias": bias.copy()}
    return head


def paddle_uie_heads(cfg: dict, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """UIE's `linear_start` / `linear_end` as paddlenlp 2.8.1 saves them: Linear(H, 1), weight (H, 1)."""
    H = cfg["hidden_size"]
    heads = {}
    for name in ("linear_start", "linear_end"):
        heads[f"{name}.weight"] = (rng.standard_normal((H, 1)) * 0.3).astype(np.float32)
        heads[f"{name}.bias"] = (rng.standard_normal(1) * 0.3).astype(np.float32)
    return heads


def write_paddle_dir(path: Path, state: dict, config: dict, *, config_name: str = "config.json",
                     vocab: bool = True) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    saved = dict(state)
    saved[NAME_TABLE_KEY] = {k: f"linear_{i}.w_0" for i, k in enumerate(state)}  # paddle appends it last
    with open(path / "model_state.pdparams", "wb") as f:
        pickle.dump(saved, f, protocol=4)  # paddle.save's default protocol
    (path / config_name).write_text(json.dumps(config))
    if vocab:
        (path / "vocab.txt").write_text("\n".join(VOCAB) + "\n", encoding="utf-8")
        (path / "tokenizer_config.json").write_text(json.dumps(
            {"do_lower_case": True, "tokenizer_class": "ErnieTokenizer", "model_max_length": 32,
             "unk_token": "[UNK]", "pad_token": "[PAD]", "cls_token": "[CLS]", "sep_token": "[SEP]",
             "mask_token": "[MASK]"}))
    return path


def paddle_config(arch: str, **overrides) -> dict:
    """A PaddleNLP 2.8 config.json (as ErnieForX.save_pretrained writes it)."""
    cfg = {"architectures": [arch], "attention_probs_dropout_prob": 0.1, "fuse": False, "hidden_act": "gelu",
           "hidden_dropout_prob": 0.1, "initializer_range": 0.02, "layer_norm_eps": 1e-12,
           "model_type": "ernie", "paddlenlp_version": None, "pool_act": "tanh", "task_id": 0,
           "use_task_id": True, **TINY}
    cfg.update(overrides)
    return cfg
