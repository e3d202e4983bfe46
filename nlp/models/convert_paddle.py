"""Convert a PaddleNLP ERNIE/BERT checkpoint into a Hugging Face transformers directory.

Source: a PaddleNLP model directory as `save_pretrained` writes it (PaddleNLP 2.x):
`model_state.pdparams` (a pickled dict name -> numpy array, read by the restricted unpickler in
`nlp.models._pdparams`), `config.json` (PaddleNLP >= 2.5) or `model_config.json` (older, with
the arguments nested under `init_args` / `init_class`), `vocab.txt`, and optionally
`tokenizer_config.json` / `special_tokens_map.json`.

Result: `config.json` with transformers' ErnieConfig/BertConfig field names, `model.safetensors`
with the parameter names of transformers' `ErnieModel` / `ErnieFor*` (or `Bert*`), and the
tokenizer files, so that both `transformers` and `nlp.models` load it.

Names are converted through ONE table (`RENAMES`). Paddle's `nn.Linear` stores its weight as
(in_features, out_features); torch's as (out, in): every Linear weight is transposed, embedding
tables are not. Every key must match the table and every shape must match the config; anything
else is an error naming the keys, never dropped silently.

PaddleNLP's `UIE` (Taskflow's `uie-*` information-extraction checkpoints: `ernie.*` plus two
pointer heads `linear_start` / `linear_end`, Linear(H, 1) each) converts to
`ErnieForInformationExtraction`, the heads kept under their Paddle names with torch's (1, H)
weights and the never-used pooler dropped; `architectures: ["UIE"]`, `init_class: UIE`, or the
head names themselves select it. The encoder of PaddleNLP < 2.4.5's UIE is named `encoder`.

Two facts checked against paddlenlp 2.8.1 itself (`paddlenlp/transformers/ernie/modeling.py`):
- `ErniePretrainedModel._init_weights` sets every LayerNorm's epsilon to 1e-12, whatever the
  config's `layer_norm_eps` says, so ERNIE converts with `layer_norm_eps = 1e-12`; PaddleNLP's
  BERT (`bert/modeling.py`) uses the config's `layer_norm_eps` and so keeps it.
- The MLM decoder (`cls.predictions.decoder`, a TransposedLinear) is tied to the word embeddings
  and stored as (vocab, hidden), like torch; its bias is saved twice (`decoder.bias` and the
  alias `decoder_bias`); older versions saved `decoder_weight` / `decoder_bias`.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import torch
from safetensors.torch import save_file

from nlp._common import ConfigError, DataError, atomic_directory, did_you_mean
from nlp.models._pdparams import load_pdparams

__all__ = ["convert_paddle_checkpoint", "convert_paddle_state_dict", "paddle_config_to_hf", "RENAMES"]

logger = logging.getLogger(__name__)

WEIGHTS_NAME = "model_state.pdparams"
CONFIG_NAMES = ("config.json", "model_config.json")  # new PaddleNLP first, then the legacy name
TOKENIZER_FILES = ("vocab.txt", "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json")

# --------------------------------------------------------------------------------------------
# The renaming table. Paddle name (after the backbone prefix is split off) -> transformers name,
# whether the 2-D weight is a Linear one to transpose, and the transformers-layout shape in
# config symbols (H hidden, I intermediate, V vocab, P positions, T token types, K task types,
# C number of labels of the head).
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Rename:
    paddle: str  # regex over the Paddle name, anchored at both ends
    hf: str  # replacement template (\1 ... refer to the regex groups)
    transpose: bool  # Paddle nn.Linear weight (in, out) -> torch (out, in)
    shape: tuple[str, ...]  # expected transformers shape, in config symbols


def _linear(paddle: str, hf: str, out: str, inp: str) -> tuple[Rename, Rename]:
    """A Linear layer: weight transposed to (out, in), bias (out,)."""
    return (Rename(rf"{paddle}\.weight", rf"{hf}.weight", True, (out, inp)),
            Rename(rf"{paddle}\.bias", rf"{hf}.bias", False, (out,)))


def _norm(paddle: str, hf: str) -> tuple[Rename, Rename]:
    return (Rename(rf"{paddle}\.weight", rf"{hf}.weight", False, ("H",)),
            Rename(rf"{paddle}\.bias", rf"{hf}.bias", False, ("H",)))


_L = r"encoder\.layers\.(\d+)"  # Paddle's nn.TransformerEncoder layer list
_HL = r"encoder.layer.\1"  # transformers' ErnieEncoder/BertEncoder layer list

# Backbone: the names inside ErnieModel/BertModel (a head model prefixes them with `ernie.`/`bert.`).
BACKBONE_RENAMES: tuple[Rename, ...] = (
    Rename(r"embeddings\.word_embeddings\.weight", "embeddings.word_embeddings.weight", False, ("V", "H")),
    Rename(r"embeddings\.position_embeddings\.weight", "embeddings.position_embeddings.weight", False, ("P", "H")),
    Rename(r"embeddings\.token_type_embeddings\.weight", "embeddings.token_type_embeddings.weight", False, ("T", "H")),
    Rename(r"embeddings\.task_type_embeddings\.weight", "embeddings.task_type_embeddings.weight", False, ("K", "H")),
    *_norm(r"embeddings\.layer_norm", "embeddings.LayerNorm"),
    *_linear(rf"{_L}\.self_attn\.q_proj", rf"{_HL}.attention.self.query", "H", "H"),
    *_linear(rf"{_L}\.self_attn\.k_proj", rf"{_HL}.attention.self.key", "H", "H"),
    *_linear(rf"{_L}\.self_attn\.v_proj", rf"{_HL}.attention.self.value", "H", "H"),
    *_linear(rf"{_L}\.self_attn\.out_proj", rf"{_HL}.attention.output.dense", "H", "H"),
    *_norm(rf"{_L}\.norm1", rf"{_HL}.attention.output.LayerNorm"),
    *_linear(rf"{_L}\.linear1", rf"{_HL}.intermediate.dense", "I", "H"),
    *_linear(rf"{_L}\.linear2", rf"{_HL}.output.dense", "H", "I"),
    *_norm(rf"{_L}\.norm2", rf"{_HL}.output.LayerNorm"),
    *_linear(r"pooler\.dense", "pooler.dense", "H", "H"),
)

# Heads: names outside the backbone, per transformers architecture suffix ("ForMaskedLM", ...).
_MLM = (
    *_linear(r"cls\.predictions\.transform", "cls.predictions.transform.dense", "H", "H"),
    *_norm(r"cls\.predictions\.layer_norm", "cls.predictions.transform.LayerNorm"),
    # The decoder is tied to the word embeddings; kept only when it differs (see _tie_decoder).
    Rename(r"cls\.predictions\.decoder\.weight", "cls.predictions.decoder.weight", False, ("V", "H")),
    Rename(r"cls\.predictions\.decoder_weight", "cls.predictions.decoder.weight", False, ("V", "H")),
    # Paddle saves the decoder bias twice (decoder.bias and its alias decoder_bias); one tensor.
    Rename(r"cls\.predictions\.decoder\.bias", "cls.predictions.bias", False, ("V",)),
    Rename(r"cls\.predictions\.decoder_bias", "cls.predictions.bias", False, ("V",)),
)
HEAD_RENAMES: dict[str, tuple[Rename, ...]] = {
    "Model": (),
    "ForMaskedLM": _MLM,
    "ForPreTraining": (*_MLM, *_linear(r"cls\.seq_relationship", "cls.seq_relationship", "2", "H")),
    "ForSequenceClassification": _linear(r"classifier", "classifier", "C", "H"),
    "ForTokenClassification": _linear(r"classifier", "classifier", "C", "H"),
    "ForMultipleChoice": _linear(r"classifier", "classifier", "1", "H"),
    # PaddleNLP calls the span head `classifier` (hidden -> 2); transformers calls it qa_outputs.
    "ForQuestionAnswering": _linear(r"classifier", "qa_outputs", "2", "H"),
    # PaddleNLP's `UIE`: two pointer heads (hidden -> 1, a sigmoid each), kept under Paddle's names
    # (nlp.tasks.extraction's ErnieForInformationExtraction stores them so).
    "ForInformationExtraction": (*_linear(r"linear_start", "linear_start", "1", "H"),
                                 *_linear(r"linear_end", "linear_end", "1", "H")),
}
RENAMES = {"backbone": BACKBONE_RENAMES, **HEAD_RENAMES}

# transformers builds these heads' backbone with add_pooling_layer=False, while PaddleNLP's
# always has a pooler, whose output those heads never use. Its weights are dropped, and logged.
NO_POOLER_HEADS = frozenset({"ForMaskedLM", "ForTokenClassification", "ForQuestionAnswering",
                             "ForInformationExtraction"})

# PaddleNLP class-name suffix -> transformers suffix (PaddleNLP spells Pretraining, HF PreTraining).
_PADDLE_ARCH_SUFFIX = {
    "Model": "Model",
    "ForMaskedLM": "ForMaskedLM",
    "ForPretraining": "ForPreTraining",
    "ForPreTraining": "ForPreTraining",
    "ForSequenceClassification": "ForSequenceClassification",
    "ForTokenClassification": "ForTokenClassification",
    "ForMultipleChoice": "ForMultipleChoice",
    "ForQuestionAnswering": "ForQuestionAnswering",
    "ForInformationExtraction": "ForInformationExtraction",
}
# PaddleNLP head classes not named <Backbone>For<Head>: class name -> head suffix. `UIE` is an
# ERNIE encoder + pointer heads; UIE-M (ErnieM) and UIE-X (ErnieLayout) have other encoders.
_PADDLE_CLASS_HEADS = {"UIE": "ForInformationExtraction"}
_UNSUPPORTED_CLASSES = {"UIEM": "an ERNIE-M encoder", "UIEX": "an ERNIE-Layout encoder with image inputs"}

# --------------------------------------------------------------------------------------------
# Config
# --------------------------------------------------------------------------------------------

# PaddleNLP ErnieConfig/BertConfig defaults (configuration.py), used where an old config omits
# a field: the Paddle model was built with these, not with transformers' defaults.
_PADDLE_DEFAULTS: dict[str, Any] = {
    "vocab_size": 30522,
    "hidden_size": 768,
    "num_hidden_layers": 12,
    "num_attention_heads": 12,
    "intermediate_size": 3072,
    "hidden_act": "gelu",
    "hidden_dropout_prob": 0.1,
    "attention_probs_dropout_prob": 0.1,
    "max_position_embeddings": 512,
    "type_vocab_size": 16,  # ErnieConfig's default (BertConfig's is 16 as well)
    "initializer_range": 0.02,
    "pad_token_id": 0,
    "layer_norm_eps": 1e-12,
}
_ERNIE_ONLY_DEFAULTS = {"task_type_vocab_size": 3, "use_task_id": False}

# Paddle-only fields that change nothing in the converted weights or forward pass.
_DROPPED_FIELDS = {
    "architectures", "init_class", "init_args", "model_type", "paddlenlp_version", "dtype",
    "fuse", "enable_recompute", "use_recompute", "recompute_granularity", "use_cache",
    "tensor_parallel_degree", "tensor_parallel_rank", "tensor_parallel_output",
    "sequence_parallel", "fuse_attention_qkv", "fuse_attention_ffn", "pool_act", "task_id",
    "num_classes", "num_choices", "dropout", "transformers_version", "tie_word_embeddings",
    "return_dict", "use_fast_layer_norm",
}


def _read_json(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ConfigError(f"{path}: not a readable JSON file ({err}).") from err
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: holds a JSON {type(data).__name__}, expected an object.")
    return data


def _flatten_legacy(config: dict) -> dict:
    """Flatten PaddleNLP's legacy `{"init_args": [{...}], "init_class": "..."}` nesting.

    A head saved by PaddleNLP < 2.5 nests the backbone's arguments one level down:
    `{"init_args": [{"init_args": [{...}], "init_class": "ErnieModel"}],
      "init_class": "ErnieForSequenceClassification", "num_classes": 2}`.
    Outer keys win over inner ones; the outermost init_class is the architecture.
    """
    out: dict = {}
    arch = config.get("init_class")
    node: Any = config
    while isinstance(node, dict):
        for key, value in node.items():
            if key not in ("init_args", "init_class"):
                out.setdefault(key, value)
        args = node.get("init_args") or []
        node = next((a for a in args if isinstance(a, dict)), None)
    if arch and "architectures" not in out:
        out["architectures"] = [arch]
    return out


def _model_type(config: Mapping[str, Any], arch: str | None) -> str:
    model_type = str(config.get("model_type") or "").lower()
    if not model_type and arch:
        model_type = "bert" if arch.startswith("Bert") else "ernie" if arch.startswith("Ernie") else ""
    model_type = model_type or "ernie"
    if model_type not in ("ernie", "bert"):
        raise ConfigError(
            f"model_type {model_type!r} is not convertible: only PaddleNLP ERNIE and BERT "
            "checkpoints are supported."
        )
    return model_type


def paddle_config_to_hf(config: Mapping[str, Any], *, architecture: str | None = None) -> dict:
    """Map a PaddleNLP config dict (new or legacy layout) to transformers' field names.

    `architecture` (a transformers class name such as "ErnieForQuestionAnswering") overrides
    the one recorded in the config. Returns the transformers config dict (with model_type and
    architectures); fields PaddleNLP-only and inert are dropped, unknown ones kept as they are.
    """
    cfg = _flatten_legacy(dict(config))
    paddle_arch = (cfg.get("architectures") or [None])[0]
    for name in (architecture, paddle_arch):
        if name in _UNSUPPORTED_CLASSES:
            raise ConfigError(f"PaddleNLP's {name} is {_UNSUPPORTED_CLASSES[name]}, which this converter does "
                              "not read; it converts ERNIE and BERT encoders (UIE among them: "
                              "architecture='UIE').")
    model_type = _model_type(cfg, architecture or paddle_arch)
    defaults = {**_PADDLE_DEFAULTS, **(_ERNIE_ONLY_DEFAULTS if model_type == "ernie" else {})}
    out: dict[str, Any] = {k: cfg.get(k, v) for k, v in defaults.items()}

    if str(cfg.get("pool_act", "tanh")) != "tanh":
        raise ConfigError(f"pool_act={cfg['pool_act']!r}: transformers' pooler is tanh only.")
    if model_type == "bert" and cfg.get("fuse"):
        raise ConfigError("fuse=true: PaddleNLP's fused BERT encoder uses other parameter names; "
                          "save the model with fuse=false.")
    if model_type == "ernie":
        # ErniePretrainedModel._init_weights forces eps 1e-12 on every LayerNorm (paddlenlp 2.8.1).
        if float(out["layer_norm_eps"]) != 1e-12:
            logger.warning("config layer_norm_eps=%s ignored: PaddleNLP's ERNIE always runs its "
                           "LayerNorms at 1e-12, which the converted config keeps", out["layer_norm_eps"])
        out["layer_norm_eps"] = 1e-12
        if int(cfg.get("task_id", 0) or 0) != 0 and out["use_task_id"]:
            logger.warning("task_id=%s: PaddleNLP fills task_type_ids with it when none are given; "
                           "transformers fills zeros, so pass task_type_ids explicitly", cfg["task_id"])
    elif out.get("use_task_id"):
        raise ConfigError("use_task_id=true is an ERNIE feature; a BERT config cannot carry it.")

    # Labels: PaddleNLP writes id2label/label2id like transformers, legacy configs num_classes.
    num_labels = cfg.get("num_labels", cfg.get("num_classes"))
    id2label = cfg.get("id2label")
    if id2label:
        out["id2label"] = {str(k): v for k, v in id2label.items()}
        out["label2id"] = cfg.get("label2id") or {v: int(k) for k, v in id2label.items()}
    elif num_labels is not None:
        out["id2label"] = {str(i): f"LABEL_{i}" for i in range(int(num_labels))}
        out["label2id"] = {f"LABEL_{i}": i for i in range(int(num_labels))}
    classifier_dropout = cfg.get("classifier_dropout", cfg.get("dropout"))
    if classifier_dropout is not None:
        out["classifier_dropout"] = classifier_dropout

    handled = set(defaults) | {"id2label", "label2id", "num_labels", "classifier_dropout"}
    for key, value in cfg.items():
        if key in handled:
            continue
        if key in _DROPPED_FIELDS:
            logger.debug("dropping PaddleNLP-only config field %s=%r", key, value)
            continue
        out[key] = value  # unknown: kept, as transformers keeps unknown config keys

    prefix = "Ernie" if model_type == "ernie" else "Bert"
    if architecture is not None:
        # PaddleNLP's own class name (`UIE`) is accepted for the transformers-style one
        head = _PADDLE_CLASS_HEADS.get(architecture)
        out["architectures"] = [prefix + head if head else architecture]
    elif paddle_arch in _PADDLE_CLASS_HEADS:
        out["architectures"] = [prefix + _PADDLE_CLASS_HEADS[paddle_arch]]
    elif paddle_arch:
        suffix = paddle_arch[len(prefix):] if paddle_arch.startswith(prefix) else None
        if suffix in _PADDLE_ARCH_SUFFIX:
            out["architectures"] = [prefix + _PADDLE_ARCH_SUFFIX[suffix]]
    if (out.get("architectures") or [""])[0].endswith("ForQuestionAnswering"):
        # transformers sizes qa_outputs by num_labels; PaddleNLP's span head is always 2 wide.
        out["id2label"] = {"0": "LABEL_0", "1": "LABEL_1"}
        out["label2id"] = {"LABEL_0": 0, "LABEL_1": 1}
    out["model_type"] = model_type
    return out


# --------------------------------------------------------------------------------------------
# Weights
# --------------------------------------------------------------------------------------------


def _dims(cfg: Mapping[str, Any], num_labels: int | None) -> dict[str, int]:
    return {
        "H": _size(cfg, "hidden_size"),
        "I": _size(cfg, "intermediate_size"),
        "V": _size(cfg, "vocab_size"),
        "P": _size(cfg, "max_position_embeddings"),
        "T": _size(cfg, "type_vocab_size"),
        "K": _size(cfg, "task_type_vocab_size", minimum=0) if "task_type_vocab_size" in cfg else 0,
        "C": int(num_labels) if num_labels is not None else -1,
        "1": 1,
        "2": 2,
    }


def _size(cfg: Mapping[str, Any], key: str, minimum: int = 1) -> int:
    """A size field of the checkpoint's config, or ConfigError naming it (a string or null there
    would end in a bare int() error)."""
    value = cfg.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(f"the checkpoint's config gives {key}={value!r}; it must be a whole number >= {minimum} "
                          f"(fix {key} in its {' / '.join(CONFIG_NAMES)})")
    return value


def _head_suffix(arch: str) -> str:
    for prefix in ("Ernie", "Bert"):
        if arch.startswith(prefix) and arch[len(prefix):] in HEAD_RENAMES:
            return arch[len(prefix):]
    valid = sorted(p + s for p in ("Ernie", "Bert") for s in HEAD_RENAMES) + sorted(_PADDLE_CLASS_HEADS)
    raise ConfigError(f"Unknown architecture {arch!r}.{did_you_mean(arch, valid)} Valid: {', '.join(valid)}.")


def _infer_head(keys: list[str]) -> str:
    """Pick the head from the parameter names when the config does not record it."""
    heads = {k.split(".")[0] for k in keys}
    if "linear_start" in heads or "linear_end" in heads:
        return "ForInformationExtraction"
    if "cls" in heads:
        return "ForPreTraining" if any(k.startswith("cls.seq_relationship.") for k in keys) else "ForMaskedLM"
    if "classifier" in heads:
        logger.warning("the config records no architecture and the weights hold a `classifier`; "
                       "converting as sequence classification (pass architecture= / --architecture "
                       "for token classification, question answering or multiple choice)")
        return "ForSequenceClassification"
    return "Model"


def _to_torch(name: str, array: np.ndarray) -> torch.Tensor:
    if array.dtype == np.uint16:  # Paddle stores bfloat16 as uint16 bit patterns
        return torch.from_numpy(np.ascontiguousarray(array).view(np.int16)).view(torch.bfloat16).clone()
    if array.dtype.kind != "f":
        raise DataError(f"parameter {name!r} has dtype {array.dtype}; expected floating point weights.")
    return torch.from_numpy(np.ascontiguousarray(array)).clone()


def convert_paddle_state_dict(
    state: Mapping[str, np.ndarray], hf_config: Mapping[str, Any], *, source: str = "state dict"
) -> dict[str, torch.Tensor]:
    """Rename, transpose and shape-check a Paddle ERNIE/BERT state dict for transformers.

    `hf_config` is the output of `paddle_config_to_hf`; its `architectures[0]` picks the head
    (inferred from the keys when absent). It is completed in place with what only the weights
    tell: `architectures` when absent, `id2label`/`label2id` when a classifier's label count is
    not in the config, `tie_word_embeddings=False` for an untied MLM decoder. Raises DataError
    listing unknown keys, missing keys and shape mismatches, all at once.
    """
    model_type = hf_config["model_type"]
    state = _legacy_uie_names(state)
    keys = list(state)
    prefix = model_type + "."
    prefixed = any(k.startswith(prefix) for k in keys)
    archs = hf_config.get("architectures") or []
    head = _head_suffix(archs[0]) if archs else _infer_head([k for k in keys if not k.startswith(prefix)])
    if not archs and isinstance(hf_config, dict):
        hf_config["architectures"] = [("Ernie" if model_type == "ernie" else "Bert") + head]
    bias = state.get("classifier.bias")
    if "id2label" not in hf_config and head in ("ForSequenceClassification", "ForTokenClassification") \
            and bias is not None and bias.ndim == 1 and isinstance(hf_config, dict):
        hf_config["id2label"] = {str(i): f"LABEL_{i}" for i in range(bias.shape[0])}
        hf_config["label2id"] = {f"LABEL_{i}": i for i in range(bias.shape[0])}
    num_labels = len(hf_config["id2label"]) if "id2label" in hf_config else None
    dims = _dims(hf_config, num_labels)
    n_layers = _size(hf_config, "num_hidden_layers")
    backbone_out = prefix if (prefixed or head != "Model") else ""
    pooler_dropped = []

    out: dict[str, torch.Tensor] = {}
    origin: dict[str, str] = {}
    unknown, bad_shape, conflicts = [], [], []
    for key in keys:
        if prefixed and key.startswith(prefix):
            name, rules, out_prefix = key[len(prefix):], BACKBONE_RENAMES, backbone_out
        elif not prefixed and head == "Model":
            name, rules, out_prefix = key, BACKBONE_RENAMES, ""
        else:
            name, rules, out_prefix = key, HEAD_RENAMES[head], ""
        for rule in rules:
            match = re.fullmatch(rule.paddle, name)
            if match:
                break
        else:
            unknown.append(key)
            continue
        if rule.paddle.startswith(_L) and int(match.group(1)) >= n_layers:
            unknown.append(key)  # a layer beyond num_hidden_layers
            continue
        hf_name = out_prefix + match.expand(rule.hf)
        if "task_type_embeddings" in hf_name and not hf_config.get("use_task_id"):
            # PaddleNLP would not even build this table (use_task_id false): refuse, never drop.
            conflicts.append(f"{key} is present but the config has use_task_id=false (PaddleNLP "
                             "ignores it then); set use_task_id: true in the source config if the "
                             "model was trained with task ids")
            continue
        if head in NO_POOLER_HEADS and rules is BACKBONE_RENAMES and rule.hf.startswith("pooler."):
            pooler_dropped.append(key)
            continue
        tensor = _to_torch(key, state[key])
        if rule.transpose and tensor.dim() == 2:  # other ranks fail the shape check below
            tensor = tensor.t().contiguous()  # Paddle Linear (in, out) -> torch (out, in)
        expected = tuple(dims[s] for s in rule.shape)
        if tuple(tensor.shape) != expected:
            bad_shape.append(f"{key}: {tuple(state[key].shape)} gives {tuple(tensor.shape)} for "
                             f"{hf_name}, the config needs {expected}")
            continue
        if hf_name in out:  # the MLM bias aliases: both names must hold the same values
            if not torch.equal(out[hf_name], tensor):
                conflicts.append(f"{origin[hf_name]} and {key} both map to {hf_name} but differ")
            continue
        out[hf_name] = tensor
        origin[hf_name] = key

    problems = []
    if unknown:
        problems.append(f"unknown parameters (not in the {model_type} renaming table for "
                        f"{model_type.capitalize()}{head}, {n_layers} layers): {', '.join(sorted(unknown))}; "
                        "if the head is another one, pass architecture= (--architecture)")
    if bad_shape:
        problems.append("shape mismatches: " + "; ".join(bad_shape))
    if conflicts:
        problems.append("; ".join(conflicts))
    missing = sorted(_expected_names(hf_config, head, backbone_out) - set(out) - _optional_names(head))
    if missing:
        problems.append(f"missing parameters: {', '.join(missing)}")
    if problems:
        raise DataError(f"{source}: cannot convert to {model_type.capitalize()}{head}: " + " | ".join(problems))
    if pooler_dropped:
        logger.info("dropped %s: transformers' %s%s has no pooler (PaddleNLP's never uses it there)",
                    ", ".join(pooler_dropped), model_type.capitalize(), head)
    _tie_decoder(out, backbone_out, hf_config)
    return out


def _legacy_uie_names(state: Mapping[str, np.ndarray]) -> Mapping[str, np.ndarray]:
    """UIE checkpoints of PaddleNLP < 2.4.5 call the encoder `encoder` (so `encoder.encoder.layers.N`);
    PaddleNLP's Taskflow renames them to `ernie.` on load (taskflow/task.py, _get_inference_model),
    and so does this."""
    keys = list(state)
    uie = any(k.startswith(("linear_start.", "linear_end.")) for k in keys)
    if not uie or any(k.startswith("ernie.") for k in keys) or not any(k.startswith("encoder.embeddings.") for k in keys):
        return state
    return {("ernie." + k[len("encoder."):] if k.startswith("encoder.") else k): v for k, v in state.items()}


def _expected_names(hf_config: Mapping[str, Any], head: str, backbone_prefix: str) -> set[str]:
    names = {
        backbone_prefix + f"embeddings.{e}.weight"
        for e in ("word_embeddings", "position_embeddings", "token_type_embeddings")
    }
    if hf_config.get("use_task_id"):
        names.add(backbone_prefix + "embeddings.task_type_embeddings.weight")
    names |= {backbone_prefix + f"embeddings.LayerNorm.{p}" for p in ("weight", "bias")}
    if head not in NO_POOLER_HEADS:
        names |= {backbone_prefix + f"pooler.dense.{p}" for p in ("weight", "bias")}
    for i in range(_size(hf_config, "num_hidden_layers")):
        for mod in ("attention.self.query", "attention.self.key", "attention.self.value",
                    "attention.output.dense", "attention.output.LayerNorm", "intermediate.dense",
                    "output.dense", "output.LayerNorm"):
            names |= {backbone_prefix + f"encoder.layer.{i}.{mod}.{p}" for p in ("weight", "bias")}
    for rule in HEAD_RENAMES[head]:
        names.add(rule.hf)
    return names


def _optional_names(head: str) -> set[str]:
    # The tied decoder weight may be absent (it is the word embedding table).
    return {"cls.predictions.decoder.weight"} if head in ("ForMaskedLM", "ForPreTraining") else set()


def _tie_decoder(out: dict[str, torch.Tensor], backbone_prefix: str, hf_config: Mapping[str, Any]) -> None:
    """Drop the MLM decoder weight when it equals the word embeddings (transformers ties them)."""
    decoder = out.get("cls.predictions.decoder.weight")
    if decoder is None:
        return
    if torch.equal(decoder, out[backbone_prefix + "embeddings.word_embeddings.weight"]):
        del out["cls.predictions.decoder.weight"]
    else:
        logger.warning("the MLM decoder differs from the word embeddings: kept untied "
                       "(tie_word_embeddings=false)")
        # Untied, transformers ties neither the weight nor decoder.bias <-> predictions.bias.
        out["cls.predictions.decoder.bias"] = out["cls.predictions.bias"].clone()
        if isinstance(hf_config, dict):
            hf_config["tie_word_embeddings"] = False


# --------------------------------------------------------------------------------------------
# Directory conversion
# --------------------------------------------------------------------------------------------


# config field -> (name suffix of the tensor that holds it, axis), for sizes a config may omit
_SIZE_SOURCES = {
    "vocab_size": ("embeddings.word_embeddings.weight", 0),
    "hidden_size": ("embeddings.word_embeddings.weight", 1),
    "max_position_embeddings": ("embeddings.position_embeddings.weight", 0),
    "type_vocab_size": ("embeddings.token_type_embeddings.weight", 0),
    "intermediate_size": ("encoder.layers.0.linear1.weight", 1),  # Paddle's (in, out)
}


def _sizes_from_weights(config: dict, state: Mapping[str, np.ndarray], path: Path) -> dict:
    """Fill the sizes an old config leaves out from the tensors that have them.

    The model_config.json of early Taskflow UIE checkpoints names the token types
    `sent_type_vocab_size` and may omit `intermediate_size`; PaddleNLP's defaults (3072, 16)
    are wrong for the smaller models, while the weights' shapes are facts. Sizes the config
    does give are kept and checked against the weights as always."""
    config = dict(config)
    if "type_vocab_size" not in config and "sent_type_vocab_size" in config:
        config["type_vocab_size"] = config.pop("sent_type_vocab_size")
    for field, (suffix, axis) in _SIZE_SOURCES.items():
        if field in config:
            continue
        key = next((k for k in state if k == suffix or k.endswith("." + suffix)), None)
        if key is not None and getattr(state[key], "ndim", 0) == 2:
            config[field] = int(state[key].shape[axis])
            logger.info("%s gives no %s: %d, from %s", path.name, field, config[field], key)
    if "num_hidden_layers" not in config:
        layers = {int(m.group(1)) for k in state if (m := re.search(r"encoder\.layers\.(\d+)\.", k))}
        if layers:
            config["num_hidden_layers"] = max(layers) + 1
            logger.info("%s gives no num_hidden_layers: %d, from the weights", path.name, max(layers) + 1)
    return config


def _find_config(src: Path) -> Path:
    for name in CONFIG_NAMES:
        if (src / name).is_file():
            return src / name
    present = sorted(p.name for p in src.iterdir()) if src.is_dir() else []
    raise ConfigError(
        f"{src}: no {' or '.join(CONFIG_NAMES)} found (files: {', '.join(present) or 'none'}). "
        "PaddleNLP's save_pretrained writes one next to model_state.pdparams; copy it from the "
        "model's source."
    )


def _write_tokenizer_files(src: Path, tmp: Path, hf_config: Mapping[str, Any]) -> None:
    if not (src / "vocab.txt").is_file():
        logger.warning("%s has no vocab.txt: the converted directory holds no tokenizer", src)
        return
    shutil.copyfile(src / "vocab.txt", tmp / "vocab.txt")
    for name in ("special_tokens_map.json", "added_tokens.json"):
        if (src / name).is_file():
            shutil.copyfile(src / name, tmp / name)
    # PaddleNLP's tokenizer_config.json names Paddle classes (ErnieTokenizer) and Paddle-only
    # keys; transformers needs a BERT WordPiece tokenizer with the same lower-casing.
    paddle_tok = _read_json(src / "tokenizer_config.json") if (src / "tokenizer_config.json").is_file() else {}
    paddle_tok = _flatten_legacy(paddle_tok)
    tok_config: dict[str, Any] = {"tokenizer_class": "BertTokenizer"}
    for key in ("do_lower_case", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token",
                "tokenize_chinese_chars", "strip_accents"):
        value = paddle_tok.get(key)
        if isinstance(value, dict):  # AddedToken serialisation
            value = value.get("content")
        if value is not None:
            tok_config[key] = value
    tok_config.setdefault("do_lower_case", True)  # ErnieTokenizer's and BertTokenizer's default
    tok_config["model_max_length"] = int(paddle_tok.get("model_max_length") or hf_config["max_position_embeddings"])
    (tmp / "tokenizer_config.json").write_text(json.dumps(tok_config, indent=2, ensure_ascii=False) + "\n",
                                               encoding="utf-8")


def convert_paddle_checkpoint(
    src_dir: str | os.PathLike, dst_dir: str | os.PathLike, *, architecture: str | None = None,
    overwrite: bool = False,
) -> Path:
    """Convert a PaddleNLP model directory into a transformers-format directory; return its path.

    `architecture` (e.g. "ErnieForQuestionAnswering") overrides the head recorded in the source
    config; PaddleNLP names every single-Linear head `classifier`, so it matters for QA. The
    result is built in a temporary sibling directory and renamed into place, so `dst_dir` is
    either complete or absent. An existing `dst_dir` is an error unless `overwrite` or it is
    an empty directory (as `nlp.hub`'s convert_once hands over).
    """
    src, dst = Path(src_dir), Path(dst_dir)
    if not src.is_dir():
        raise DataError(f"{src}: not a directory. Give the PaddleNLP model directory holding {WEIGHTS_NAME}.")
    weights = src / WEIGHTS_NAME
    if not weights.is_file():
        others = sorted(p.name for p in src.glob("*.pdparams"))
        hint = f" It holds {', '.join(others)}; rename the model weights to {WEIGHTS_NAME}." if others else ""
        raise DataError(f"{src}: no {WEIGHTS_NAME}.{hint}")
    if dst.exists() and not overwrite and not (dst.is_dir() and not any(dst.iterdir())):
        raise DataError(f"{dst} already exists; choose another destination or pass overwrite=True (--overwrite).")

    config_path = _find_config(src)
    state = load_pdparams(weights)
    config = _sizes_from_weights(_flatten_legacy(_read_json(config_path)), state, config_path)
    hf_config = paddle_config_to_hf(config, architecture=architecture)
    tensors = convert_paddle_state_dict(state, hf_config, source=str(weights))

    # overwrite=True: the old directory is swapped out only once the new one is complete
    with atomic_directory(dst) as tmp:
        save_file(tensors, str(tmp / "model.safetensors"), metadata={"format": "pt"})
        (tmp / "config.json").write_text(json.dumps(hf_config, indent=2, ensure_ascii=False, sort_keys=True) + "\n",
                                         encoding="utf-8")
        _write_tokenizer_files(src, tmp, hf_config)
    logger.info("converted %s (%d tensors, %s) -> %s", src, len(tensors), hf_config["architectures"][0], dst)
    return dst
