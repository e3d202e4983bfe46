"""Machinery behind every encoder model: outputs, weight init, save/load in transformers' format.

Users call `from_pretrained` / `save_pretrained` on the model classes; nothing here is imported
by name outside nlp.models. On disk a model directory is exactly what transformers writes
(`config.json` + `model.safetensors`, transformers' parameter names); in memory a model may name
and fuse its parameters differently. Each model class says how through `_hf_key_map()`
(our name -> the one or more transformers names it is stored as, fused tensors concatenated on
dim 0), and this module does the bookkeeping once: prefixes (`ernie.` / `bert.` for heads),
legacy names (`LayerNorm.gamma`), tied copies, missing and unexpected keys by name, every shape.
"""

from __future__ import annotations

import logging
import os
import pickle
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Mapping

import torch
from torch import nn

from nlp._common import ConfigError, atomic_write

from ._int8_weights import INT8_FORMAT, dequantize_rows
from .config import CONFIG_NAME, ErnieConfig

__all__ = ["PreTrainedEncoder", "EncoderOutput", "MaskedLMOutput", "WeightsFileError", "WEIGHTS_NAME", "PT_WEIGHTS_NAME"]

logger = logging.getLogger(__name__)

WEIGHTS_NAME = "model.safetensors"
PT_WEIGHTS_NAME = "pytorch_model.bin"

# Top-level names of a bare backbone's keys; anything else at the top of a file is a head's.
_BACKBONE_ROOTS = ("embeddings.", "encoder.", "pooler.")
# Keys older checkpoints carry that hold no information for us (buffers, tied copies).
_IGNORED_SUFFIXES = ("embeddings.position_ids", "embeddings.token_type_ids")
# A head copy of a tied tensor: dropped on load (the tie supplies it).
_TIED_COPIES = ("cls.predictions.decoder.weight", "lm_head.decoder.weight")
# Aliases: (name in some checkpoints, the name we read it as when that one is absent).
_ALIASES = (("cls.predictions.decoder.bias", "cls.predictions.bias"),
            ("lm_head.decoder.bias", "lm_head.bias"))
# model_type -> (the backbone's key prefix inside a head checkpoint, the class-name prefix of
# config.json's `architectures`), as transformers names them.
_HF_NAMES = {"ernie": ("ernie.", "Ernie"), "bert": ("bert.", "Bert"),
             "xlm-roberta": ("roberta.", "XLMRoberta")}


@dataclass
class EncoderOutput:
    """`last_hidden_state` (B, T, H); `pooler_output` (B, H), or (S, H) for packed input with S
    sequences in row-major order (one row per sequence, like the packing collator's labels;
    nlp._packing), None without a pooler."""

    last_hidden_state: torch.Tensor | None
    pooler_output: torch.Tensor | None = None


@dataclass
class MaskedLMOutput:
    """`logits` (B, T, V); `loss` (scalar) when labels were given (-100 = ignored position)."""

    loss: torch.Tensor | None
    logits: torch.Tensor


def _legacy_rename(key: str) -> str:
    """TF-era names (`LayerNorm.gamma` / `.beta`) as transformers renames them on load."""
    if key.endswith("LayerNorm.gamma"):
        return key[: -len("gamma")] + "weight"
    if key.endswith("LayerNorm.beta"):
        return key[: -len("beta")] + "bias"
    return key


class WeightsFileError(ConfigError):
    """A weights file that cannot be read: truncated, corrupt, or a pickle refused as unsafe.

    `path` is the file. The message names it and what is wrong; the layer that knows where the file
    came from (nlp.auto, the CLI) adds how to fetch it again.
    """

    def __init__(self, message: str, path: Path) -> None:
        super().__init__(message)
        self.path = path


def _unreadable(path: Path, err: Exception) -> WeightsFileError:
    size = path.stat().st_size if path.exists() else 0
    if path.suffix == ".safetensors":
        why = f"is not a complete safetensors file ({size} bytes; {str(err).splitlines()[0] if str(err) else type(err).__name__})"
        what = "truncated or corrupt"
    elif isinstance(err, pickle.UnpicklingError):
        detail = next((ln.strip() for ln in str(err).splitlines() if "WeightsUnpickler error" in ln), "")
        why = (
            "was refused: it is not a plain tensor checkpoint, and loading a pickle that names other "
            f"objects could run code ({detail or 'torch.load(weights_only=True) failed'})"
        )
        what = "not trusted"
    else:
        why = f"cannot be read ({size} bytes; {type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''})"
        what = "truncated or corrupt"
    fix = (
        "Replace it with a model.safetensors saved where the file is trusted."
        if what == "not trusted" else "The file is truncated or corrupt: replace it with a good copy."
    )
    return WeightsFileError(f"weights file {path} {why}. {fix}", path)


def _read_state_dict(directory: Path) -> dict[str, torch.Tensor]:
    st = directory / WEIGHTS_NAME
    if st.is_file():
        from safetensors import safe_open

        try:
            with safe_open(str(st), framework="pt") as f:
                metadata = f.metadata() or {}
                state = {k: f.get_tensor(k) for k in f.keys()}
        except Exception as err:  # SafetensorError has no useful base class
            raise _unreadable(st, err) from err
        if metadata.get("format") == INT8_FORMAT:  # a compact release copy (nlp/models/_int8_weights.py)
            try:
                return dequantize_rows(state)
            except ValueError as err:
                raise WeightsFileError(f"weights file {st} is not a valid int8 weights file: {err}", st) from None
        return state
    pt = directory / PT_WEIGHTS_NAME
    if pt.is_file():
        # weights_only: a pickle that names any global other than tensors is refused.
        try:
            state = torch.load(str(pt), map_location="cpu", weights_only=True)
        except (pickle.UnpicklingError, RuntimeError, EOFError, ValueError, OSError) as err:
            raise _unreadable(pt, err) from err
        if not isinstance(state, dict):
            raise WeightsFileError(f"weights file {pt} does not hold a state dict (found {type(state).__name__})", pt)
        return state
    found = sorted(p.name for p in directory.iterdir()) if directory.is_dir() else []
    raise ConfigError(
        f"no weights in {directory}: expected {WEIGHTS_NAME} or {PT_WEIGHTS_NAME}, found "
        f"{found or 'nothing'}. A PaddleNLP checkpoint (model_state.pdparams) must be converted "
        f"first: `nlp convert paddle SRC DST`."
    )


class PreTrainedEncoder(nn.Module):
    """Base of the backbone and of every task head: init, gradient checkpointing, save/load.

    A head subclass stores its backbone as `self.backbone` (an ErnieModel) and names its own
    modules as transformers does (e.g. `classifier`), or lists renames in `_HEAD_KEYS`.
    Subclasses set `_HF_SUFFIX` (e.g. "ForSequenceClassification") for config.json's
    `architectures`.
    """

    config_class: ClassVar[type] = ErnieConfig
    _HF_SUFFIX: ClassVar[str] = "Model"
    # our parameter name -> transformers name, for head parameters named differently
    _HEAD_KEYS: ClassVar[dict[str, str]] = {}

    def __init__(self, config: ErnieConfig) -> None:
        super().__init__()
        if not isinstance(config, ErnieConfig):
            raise TypeError(f"config must be an ErnieConfig, got {type(config).__name__}")
        self.config = config
        self.new_head_weights: tuple[str, ...] = ()  # set by loading: the head's weights a checkpoint lacked

    def decoding_tensors(self) -> dict[str, torch.Tensor]:
        """Tensors, by name, that the head's decoding uses outside the network (an exported graph
        computes the outputs only): a backend carries them as `decoding` and an export writes them
        beside the model. None for most heads; a head whose decoding has learnt parameters
        returns them."""
        return {}

    # ------------------------------------------------------------------ init
    def post_init(self) -> None:
        """Initialise weights as transformers does (normal(0, initializer_range), zero bias)."""
        self.apply(self._init_weights)

    def _init_weights(self, module: nn.Module) -> None:
        std = self.config.initializer_range
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, mean=0.0, std=std)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, mean=0.0, std=std)
            if module.padding_idx is not None:
                with torch.no_grad():
                    module.weight[module.padding_idx].zero_()
        elif isinstance(module, nn.LayerNorm):
            nn.init.ones_(module.weight)
            nn.init.zeros_(module.bias)

    # ------------------------------------------------------------------ checkpointing
    def _encoder_backbone(self) -> "PreTrainedEncoder":
        return getattr(self, "backbone", self)

    def grow_token_types(self, n: int) -> None:
        """Give the model `n` token type ids if it has fewer. The new rows start as copies of row
        0, so a new id computes what id 0 did until training moves it: a model learning a
        gazetteer's ids (nlp/tokenizer/gazetteer.py) starts from where it was."""
        embeddings = self._encoder_backbone().embeddings
        old = embeddings.token_type
        have, width = old.weight.shape
        if n <= have:
            return
        grown = nn.Embedding(n, width, device=old.weight.device, dtype=old.weight.dtype)
        with torch.no_grad():
            grown.weight[:have] = old.weight
            grown.weight[have:] = old.weight[0]
        embeddings.token_type = grown
        self.config.type_vocab_size = self._encoder_backbone().config.type_vocab_size = n

    def gradient_checkpointing_enable(self) -> None:
        """Recompute each encoder layer in backward (use_reentrant=False) to save memory."""
        self._encoder_backbone().gradient_checkpointing = True

    def gradient_checkpointing_disable(self) -> None:
        self._encoder_backbone().gradient_checkpointing = False

    @property
    def is_gradient_checkpointing(self) -> bool:
        return bool(getattr(self._encoder_backbone(), "gradient_checkpointing", False))

    # ------------------------------------------------------------------ key mapping
    @property
    def _hf_backbone_prefix(self) -> str:
        return _HF_NAMES[self.config.model_type][0]

    def _hf_key_map(self) -> dict[str, list[str]]:
        """our state_dict name -> transformers name(s); the canonical form: 'backbone::' or
        'head::' + name relative to the backbone / model root."""
        out: dict[str, list[str]] = {}
        if hasattr(self, "backbone"):
            for ours, theirs in self.backbone._backbone_key_map().items():
                out[f"backbone.{ours}"] = [f"backbone::{t}" for t in theirs]
            for name in self.state_dict():
                if not name.startswith("backbone."):
                    out[name] = [f"head::{self._HEAD_KEYS.get(name, name)}"]
        else:
            for ours, theirs in self._backbone_key_map().items():
                out[ours] = [f"backbone::{t}" for t in theirs]
        return out

    def _canonical_to_disk(self, key: str) -> str:
        kind, name = key.split("::", 1)
        if kind == "backbone" and hasattr(self, "backbone"):
            return self._hf_backbone_prefix + name
        return name

    @staticmethod
    def _disk_to_canonical(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Strip the checkpoint's backbone prefix, whichever it is (`ernie.`, `bert.`,
        `roberta.` or none)."""
        keys = list(state)
        prefix = ""
        for p in (prefix for prefix, _ in _HF_NAMES.values()):
            if any(k.startswith(p) for k in keys):
                prefix = p
                break
        out: dict[str, torch.Tensor] = {}
        for key, value in state.items():
            key = _legacy_rename(key)
            if prefix and key.startswith(prefix):
                out["backbone::" + key[len(prefix):]] = value
            elif not prefix and key.startswith(_BACKBONE_ROOTS):
                out["backbone::" + key] = value
            else:
                out["head::" + key] = value
        return out

    # ------------------------------------------------------------------ save
    def save_pretrained(self, directory: str | os.PathLike,
                        state_dict: Mapping[str, torch.Tensor] | None = None) -> Path:
        """Write config.json + model.safetensors with transformers' names; returns the dir.
        `state_dict` (this model's names, as in transformers): the weights to write instead of
        the model's own, e.g. gathered from a sharded model's shards."""
        from safetensors.torch import save

        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        arch = _HF_NAMES[self.config.model_type][1] + self._HF_SUFFIX
        config = self.config.replace()
        config.extra["architectures"] = [arch]
        config.save_pretrained(directory)
        params = self.state_dict() if state_dict is None else state_dict
        tensors: dict[str, torch.Tensor] = {}
        for ours, theirs in self._hf_key_map().items():
            value = params[ours].detach().cpu()
            parts = value.chunk(len(theirs), dim=0) if len(theirs) > 1 else (value,)
            for key, part in zip(theirs, parts):
                tensors[self._canonical_to_disk(key)] = part.contiguous()
        with atomic_write(directory / WEIGHTS_NAME, "wb") as f:
            f.write(save(tensors, metadata={"format": "pt"}))
        return directory

    # ------------------------------------------------------------------ load
    @classmethod
    def from_pretrained(cls, directory: str | os.PathLike, **config_overrides: Any):
        """Load a transformers-format directory (ours, transformers', or a converted Paddle one).

        `config_overrides` replace config.json values (e.g. `num_labels=3`,
        `attention_probs_dropout_prob=0.0`). Returns the model in eval mode, like transformers.
        """
        directory = Path(directory)
        if not directory.is_dir():
            raise ConfigError(f"{directory} is not a model directory")
        config = ErnieConfig.from_pretrained(directory, **config_overrides)
        model = cls(config)
        model.load_hf_state_dict(_read_state_dict(directory), source=str(directory))
        model.eval()
        return model

    def load_hf_state_dict(self, state: dict[str, torch.Tensor], source: str = "state dict") -> None:
        """Copy a transformers-named state dict in, checking every key and shape."""
        found = self._disk_to_canonical(state)
        for old, new in _ALIASES:
            if f"head::{old}" in found and f"head::{new}" not in found:
                found[f"head::{new}"] = found.pop(f"head::{old}")
        params = self.state_dict()
        key_map = self._hf_key_map()
        expected = {k for theirs in key_map.values() for k in theirs}
        has_pooler = any(k.startswith("backbone::pooler.") for k in expected)

        ignored, other_heads, bad_unexpected = [], [], []
        for key in sorted(set(found) - expected):
            name = key.split("::", 1)[1]
            if name.endswith(_IGNORED_SUFFIXES) or name in _TIED_COPIES or name in (o for o, _ in _ALIASES):
                ignored.append(name)
            elif key.startswith("head::") or (key.startswith("backbone::pooler.") and not has_pooler):
                other_heads.append(name)
            else:
                bad_unexpected.append(name)
        missing = sorted(expected - set(found))
        new_ok = [k for k in missing if k.startswith("head::") or k.startswith("backbone::pooler.")]
        bad_missing = [k.split("::", 1)[1] for k in missing if k not in new_ok]

        mismatched = []
        for ours, theirs in key_map.items():
            if not all(k in found for k in theirs):
                continue
            tensors = [found[k] for k in theirs]
            value = torch.cat(tensors, 0) if len(tensors) > 1 else tensors[0]
            if tuple(value.shape) != tuple(params[ours].shape):
                shapes = ", ".join(f"{self._canonical_to_disk(k)} {tuple(found[k].shape)}" for k in theirs)
                mismatched.append(f"{shapes} (model expects {tuple(params[ours].shape)})")
        problems = []
        if bad_missing:
            problems.append(f"missing keys: {', '.join(bad_missing)}")
        if bad_unexpected:
            problems.append(f"unexpected keys: {', '.join(bad_unexpected)}")
        if mismatched:
            problems.append(f"shape mismatches: {'; '.join(mismatched)}")
        if problems:
            raise ConfigError(
                f"checkpoint {source} does not fit {type(self).__name__} "
                f"(model_type={self.config.model_type!r}, use_task_id={self.config.use_task_id}): "
                + "; ".join(problems)
                + ". Check that config.json describes these weights."
            )
        with torch.no_grad():
            for ours, theirs in key_map.items():
                if all(k in found for k in theirs):
                    tensors = [found[k] for k in theirs]
                    value = torch.cat(tensors, 0) if len(tensors) > 1 else tensors[0]
                    params[ours].copy_(value)
        # the task head's own weights that were not in the checkpoint (a pretrained base model under
        # a task head): what inference refuses to run, since its answers would be random
        self.new_head_weights = tuple(self._canonical_to_disk(k) for k in new_ok if k.startswith("head::"))
        if new_ok:
            logger.warning(
                "%s: newly initialised (not in %s): %s. Train the model before using it.",
                type(self).__name__, source, ", ".join(self._canonical_to_disk(k) for k in new_ok),
            )
        if other_heads:
            logger.warning(
                "%s: weights in %s not used by this model (another head's): %s",
                type(self).__name__, source, ", ".join(other_heads),
            )
        if ignored:
            logger.debug("ignored keys (buffers / tied copies): %s", ", ".join(ignored))


def select_layers(model: PreTrainedEncoder, layer_map: list[int] | tuple[int, ...]) -> PreTrainedEncoder:
    """A model of the same class with len(layer_map) encoder layers, layer i a copy of `model`'s
    layer layer_map[i]; every other weight (embeddings, pooler, the task head) copied as is.
    Fewer layers make a student of a fine-tuned teacher, or of a pretrained model ([0, 2, 4] of 6);
    more grow one (depth growth by copying, Gong et al. 2019). ConfigError for a layer it lacks."""
    backbone = model._encoder_backbone()
    n = len(backbone.layers)
    bad = [i for i in layer_map if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < n]
    if not layer_map or bad:
        raise ConfigError(f"layer_map {list(layer_map)}: {'names layers ' + str(bad) if bad else 'is empty'}, but "
                          f"the model has {n} (valid: a non-empty list of 0..{n - 1})")
    new = type(model)(model.config.replace(num_hidden_layers=len(layer_map)))
    prefix = "backbone.layers." if backbone is not model else "layers."
    state = {k: v for k, v in model.state_dict().items() if not k.startswith(prefix)}
    for i, j in enumerate(layer_map):
        state.update({f"{prefix}{i}.{k}": v for k, v in backbone.layers[j].state_dict().items()})
    new.load_state_dict(state)  # copies into new's own parameters: no tensor is shared
    return new
