"""Architecture config of the ERNIE / Chinese-BERT / XLM-RoBERTa family, as a typed dataclass.

The JSON form uses transformers' ErnieConfig / BertConfig / XLMRobertaConfig field names, so a `config.json` written
here loads in transformers and the other way round. Keys this class does not model (for example
`directionality`, `pooler_fc_size` of the BERT cards, or `architectures`) are kept in `extra` and
written back unchanged, so a round trip never loses information.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nlp._common import ConfigError, atomic_write, did_you_mean

__all__ = ["ErnieConfig", "CONFIG_NAME", "SUPPORTED_ACTIVATIONS", "MAX_PARAMETERS"]

CONFIG_NAME = "config.json"
# The largest encoder a config may describe: 20 billion parameters (80 GB of fp32 weights),
# twice the largest ERNIE 3.0. More is a typo (`num_hidden_layers: 1000000000`, an extra
# `intermediate_size` zero) that would allocate until the machine runs out of memory, so it is
# refused before anything is allocated, as is a model whose fp32 weights exceed this machine's
# memory (models are built in fp32 on the CPU first).
MAX_PARAMETERS = 20_000_000_000

# Activations the encoder implements (the names transformers' ACT2FN uses for them).
SUPPORTED_ACTIVATIONS = ("gelu", "relu", "gelu_new", "gelu_pytorch_tanh", "silu", "swish")
_MODEL_TYPES = ("ernie", "bert", "xlm-roberta")
# Architectures whose position ids start after the padding id (fairseq's RoBERTa convention:
# position = padding_idx + 1 + the index among the row's non-pad tokens), so that the first
# padding_idx + 1 rows of the position table are never used by a real token.
_PADDING_OFFSET_POSITIONS = ("xlm-roberta",)
# Fields only ERNIE has; written for model_type "ernie" only, so a BERT config.json stays a
# plain BertConfig.
_ERNIE_ONLY = ("task_type_vocab_size", "use_task_id")


@dataclass
class ErnieConfig:
    """Hyper-parameters of an ERNIE / BERT encoder (defaults: transformers' ErnieConfig)."""

    vocab_size: int = 30522  # ERNIE 1.0 uses 18000, ERNIE 3.0 40000, Chinese BERT 21128
    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    # None: hidden_size / num_attention_heads, as in every published checkpoint. Set by width
    # pruning (nlp.train.width_pruning), which keeps fewer heads of the same size, so that the
    # attention width num_attention_heads * attention_head_size is below hidden_size. Written to
    # config.json only when set; transformers' BERT / ERNIE cannot express it (docs/compress.md).
    attention_head_size: int | None = None
    hidden_act: str = "gelu"  # ERNIE 1.0 / 2.0 zh checkpoints were trained with "relu"
    hidden_dropout_prob: float = 0.1
    # Any value > 0 makes SDPA fall back from its fused CPU flash kernel to the unfused math
    # path (about 2.7x slower attention at 128 tokens); set 0.0 when fine-tuning for speed.
    attention_probs_dropout_prob: float = 0.1
    max_position_embeddings: int = 512  # ERNIE 1.0: 513, ERNIE 3.0: 2048
    type_vocab_size: int = 2  # ERNIE 3.0: 4
    task_type_vocab_size: int = 3  # ERNIE 3.0 task-type embedding rows (3 for base, 16 others)
    use_task_id: bool = False  # True for ERNIE 3.0 (not tiny v2); adds task_type_embeddings
    initializer_range: float = 0.02
    # transformers' and PaddleNLP's default; the torch ports of ERNIE on the HF hub declare 1e-5
    # although Paddle trained them with 1e-12 (see presets.py).
    layer_norm_eps: float = 1e-12
    pad_token_id: int | None = 0
    model_type: str = "ernie"
    tie_word_embeddings: bool = True  # the MLM decoder shares the word-embedding matrix
    # Head fields transformers keeps in the same config.json.
    classifier_dropout: float | None = None  # None: heads use hidden_dropout_prob
    num_labels: int | None = None  # derived from id2label when that is given
    id2label: dict[int, str] | None = None
    label2id: dict[str, int] | None = None
    problem_type: str | None = None
    # Unknown keys of a loaded config.json, written back unchanged.
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._normalise_labels()
        self._validate()

    # ------------------------------------------------------------------ validation
    def _normalise_labels(self) -> None:
        if self.id2label is not None:
            try:
                self.id2label = {int(k): str(v) for k, v in dict(self.id2label).items()}
            except (TypeError, ValueError) as e:
                raise ConfigError(
                    f"id2label must map integer ids to label names, got {self.id2label!r}"
                ) from e
            if self.num_labels is not None and self.num_labels != len(self.id2label):
                raise ConfigError(
                    f"num_labels={self.num_labels} disagrees with id2label, which has "
                    f"{len(self.id2label)} labels; pass one of them, not both"
                )
            self.num_labels = len(self.id2label)
        else:
            n = 2 if self.num_labels is None else self.num_labels
            if not isinstance(n, int) or isinstance(n, bool) or n < 1:
                raise ConfigError(f"num_labels must be an int >= 1, got {n!r}")
            self.num_labels = n
            self.id2label = {i: f"LABEL_{i}" for i in range(n)}
        if self.label2id is None:
            self.label2id = {v: k for k, v in self.id2label.items()}
        else:
            self.label2id = {str(k): int(v) for k, v in dict(self.label2id).items()}

    def _validate(self) -> None:
        positive = (
            "vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
            "intermediate_size", "max_position_embeddings", "type_vocab_size",
            "task_type_vocab_size",
        )
        for name in positive:
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigError(f"{name} must be a positive int, got {value!r}")
        if self.attention_head_size is not None:
            value = self.attention_head_size
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigError(f"attention_head_size must be a positive int or null, got {value!r}")
        elif self.hidden_size % self.num_attention_heads:
            raise ConfigError(
                f"hidden_size={self.hidden_size} is not divisible by "
                f"num_attention_heads={self.num_attention_heads}; pick a head count that divides it "
                "(or give attention_head_size)"
            )
        for name in ("hidden_dropout_prob", "attention_probs_dropout_prob", "classifier_dropout"):
            value = getattr(self, name)
            if value is None and name == "classifier_dropout":
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1:
                raise ConfigError(f"{name} must be a float in [0, 1), got {value!r}")
        if self.hidden_act not in SUPPORTED_ACTIVATIONS:
            raise ConfigError(
                f"hidden_act={self.hidden_act!r} is not supported; valid: "
                f"{', '.join(SUPPORTED_ACTIVATIONS)}.{did_you_mean(self.hidden_act, SUPPORTED_ACTIVATIONS)}"
            )
        if self.model_type not in _MODEL_TYPES:
            raise ConfigError(
                f"model_type={self.model_type!r} is not supported; valid: {', '.join(_MODEL_TYPES)}"
            )
        if isinstance(self.layer_norm_eps, bool) or not isinstance(self.layer_norm_eps, (int, float)) \
                or not 0 < self.layer_norm_eps < 1:
            raise ConfigError(f"layer_norm_eps must be a float in (0, 1), got {self.layer_norm_eps!r}")
        if isinstance(self.initializer_range, bool) or not isinstance(self.initializer_range, (int, float)) \
                or not 0 < self.initializer_range < math.inf:
            raise ConfigError(f"initializer_range must be > 0, got {self.initializer_range!r}")
        if self.pad_token_id is not None and not 0 <= self.pad_token_id < self.vocab_size:
            raise ConfigError(
                f"pad_token_id={self.pad_token_id} is outside the vocabulary [0, {self.vocab_size})"
            )
        if self.max_sequence_length < 1:
            raise ConfigError(
                f"max_position_embeddings={self.max_position_embeddings} leaves no position for a "
                f"token: {self.model_type} positions start at pad_token_id + 1 = {self.position_offset}"
            )
        if not isinstance(self.use_task_id, bool):
            raise ConfigError(f"use_task_id must be true or false, got {self.use_task_id!r}")
        if self.use_task_id and self.model_type != "ernie":
            raise ConfigError(
                f"use_task_id=True needs model_type='ernie' ({self.model_type} has no task-type embedding)"
            )
        self._check_size()

    def _check_size(self) -> None:
        n = self.num_parameters
        size = 4 * n  # bytes of fp32 weights
        memory = _physical_memory()
        if n <= MAX_PARAMETERS and (memory is None or size <= memory):
            return
        limit = (f"more than the {MAX_PARAMETERS:,} parameters a config may describe" if n > MAX_PARAMETERS
                 else f"more than this machine's memory ({_gib(memory)})")
        sizes = ", ".join(f"{k}={getattr(self, k)}" for k in (
            "vocab_size", "hidden_size", "num_hidden_layers", "intermediate_size",
            "max_position_embeddings", "type_vocab_size"))
        raise ConfigError(
            f"this config describes a model of about {n:,} parameters ({size:,} bytes = {_gib(size)} "
            f"of fp32 weights), {limit}; check the sizes ({sizes})"
        )

    @property
    def num_parameters(self) -> int:
        """The parameters of the encoder this config describes (embeddings, layers, pooler; a
        task head adds at most a vocabulary-sized bias and one hidden x hidden matrix)."""
        h, i, a = self.hidden_size, self.intermediate_size, self.attention_size
        rows = self.vocab_size + self.max_position_embeddings + self.type_vocab_size
        if self.use_task_id:
            rows += self.task_type_vocab_size
        embeddings = rows * h + 2 * h  # tables + LayerNorm
        layer = 3 * (h * a + a) + a * h + h + 2 * h + 2 * h * i + i + h + 2 * h  # QKV + output, norm, FFN, norm
        pooler = h * h + h
        return embeddings + self.num_hidden_layers * layer + pooler

    # ------------------------------------------------------------------ dict / JSON
    @property
    def position_offset(self) -> int:
        """The position id of a sequence's first token: 0, or padding id + 1 for XLM-R."""
        if self.model_type in _PADDING_OFFSET_POSITIONS:
            return (self.pad_token_id or 0) + 1
        return 0

    @property
    def max_sequence_length(self) -> int:
        """The most tokens one sequence may hold: the position table's rows from the offset on
        (512 for XLM-R's 514 rows, max_position_embeddings for BERT / ERNIE)."""
        return self.max_position_embeddings - self.position_offset

    @property
    def head_dim(self) -> int:
        if self.attention_head_size is not None:
            return self.attention_head_size
        return self.hidden_size // self.num_attention_heads

    @property
    def attention_size(self) -> int:
        """The width of the heads together (the rows of each of q, k, v): hidden_size, unless
        width pruning kept fewer heads."""
        return self.num_attention_heads * self.head_dim

    @classmethod
    def from_dict(cls, data: dict[str, Any], **overrides: Any) -> "ErnieConfig":
        """Build from a transformers-style dict; unknown keys go to `extra`.

        `num_labels` in `overrides` replaces the label maps of `data`, as in transformers.
        """
        data = {**data, **overrides}
        if "num_labels" in overrides and "id2label" not in overrides:
            if data.get("id2label") is not None and len(data["id2label"]) != overrides["num_labels"]:
                data.pop("id2label", None)
                data.pop("label2id", None)
        known = {f.name for f in dataclasses.fields(cls)} - {"extra"}
        kwargs = {k: v for k, v in data.items() if k in known}
        extra = {k: v for k, v in data.items() if k not in known and k != "extra"}
        if isinstance(data.get("extra"), dict):
            extra.update(data["extra"])
        if "num_labels" in kwargs and kwargs.get("id2label") is not None:
            if len(kwargs["id2label"]) == kwargs["num_labels"]:
                kwargs.pop("num_labels")
        return cls(**kwargs, extra=extra)

    def to_dict(self) -> dict[str, Any]:
        """The transformers-style dict (keys sorted, labels with string ids like transformers)."""
        out: dict[str, Any] = dict(self.extra)
        for f in dataclasses.fields(self):
            if f.name in ("extra", "num_labels"):
                continue
            if f.name in _ERNIE_ONLY and self.model_type != "ernie":
                continue
            if f.name == "attention_head_size" and self.attention_head_size is None:
                continue  # configs of unpruned models stay transformers' exactly
            out[f.name] = getattr(self, f.name)
        out["id2label"] = {str(k): v for k, v in self.id2label.items()}
        return dict(sorted(out.items()))

    def to_json_string(self) -> str:
        return json.dumps(self.to_dict(), indent=2, ensure_ascii=False) + "\n"

    @classmethod
    def from_json_file(cls, path: str | os.PathLike, **overrides: Any) -> "ErnieConfig":
        path = Path(path)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ConfigError(f"no config file at {path}") from None
        except json.JSONDecodeError as e:
            raise ConfigError(f"{path} is not valid JSON: {e}") from None
        if not isinstance(data, dict):
            raise ConfigError(f"{path} must hold a JSON object, got {type(data).__name__}")
        try:
            return cls.from_dict(data, **overrides)
        except ConfigError as err:  # name the file: it may be one of many in a cache
            raise ConfigError(f"{path}: {err}") from None

    @classmethod
    def from_pretrained(cls, directory: str | os.PathLike, **overrides: Any) -> "ErnieConfig":
        """Read `config.json` from a local model directory (or the file itself)."""
        path = Path(directory)
        if path.is_dir():
            path = path / CONFIG_NAME
        return cls.from_json_file(path, **overrides)

    def save_pretrained(self, directory: str | os.PathLike) -> Path:
        """Write `config.json` atomically; returns its path."""
        path = Path(directory) / CONFIG_NAME
        with atomic_write(path, "w", encoding="utf-8") as f:
            f.write(self.to_json_string())
        return path

    def replace(self, **changes: Any) -> "ErnieConfig":
        """A copy with some fields changed (validated again)."""
        return self.from_dict(self.to_dict(), **changes)


def _physical_memory() -> int | None:
    """Bytes of RAM of this machine, or None where the OS does not say."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, OSError, ValueError):
        return None


def _gib(n: int) -> str:
    return f"{n / 2**30:,.1f} GiB"
