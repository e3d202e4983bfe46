"""Training settings: typed dataclasses, a validator that reports every problem at once,
and `key.sub=value` overrides.

Why one schema for the library and the recipes: `nlp finetune recipe.yaml lr=...` and
`Trainer(model, TrainSettings(...))` must accept exactly the same knobs, so that a recipe is
nothing more than these dataclasses written as YAML. `from_dict` turns a nested mapping (a
parsed YAML section) into the dataclasses; `parse_overrides` + `apply_overrides` put command-line
`key.sub=value` pairs into that mapping first. Unknown keys, wrong types and bad values are all
collected and raised together in one `ConfigError`, with a did-you-mean for misspelt keys
(torchtune's `config/_validate.py` habit), before any work starts.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass, field
from typing import Any, Literal, Mapping, Sequence, Union

import yaml

from nlp._common import ConfigError, did_you_mean

__all__ = [
    "OptimSettings",
    "ScheduleSettings",
    "DataSettings",
    "EvalSettings",
    "CheckpointSettings",
    "LogSettings",
    "TrainSettings",
    "from_dict",
    "to_dict",
    "parse_overrides",
    "apply_overrides",
]

MixedPrecision = Literal["auto", "no", "fp16", "bf16"]


@dataclass
class OptimSettings:
    """AdamW. Biases and normalisation weights never get weight decay (see `nlp.train.optim`)."""

    lr: float = 5e-5  # peak learning rate, reached at the end of warmup
    weight_decay: float = 0.01
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    max_grad_norm: float | None = 1.0  # gradient clipping; None turns it off
    # fused: one kernel per parameter (CUDA, CPU; the fastest); foreach: batched ops;
    # auto picks fused where torch has the kernel for the parameters' device, else foreach.
    impl: Literal["auto", "fused", "foreach", "for_loop"] = "auto"

    def _check(self) -> list[str]:
        errors = []
        if self.lr <= 0:
            errors.append(f"lr must be > 0, got {self.lr}")
        if self.weight_decay < 0:
            errors.append(f"weight_decay must be >= 0, got {self.weight_decay}")
        if not all(0.0 <= b < 1.0 for b in self.betas):
            errors.append(f"betas must lie in [0, 1), got {list(self.betas)}")
        if self.max_grad_norm is not None and self.max_grad_norm <= 0:
            errors.append(f"max_grad_norm must be > 0 or null, got {self.max_grad_norm}")
        return errors


@dataclass
class ScheduleSettings:
    """Learning-rate schedule: warmup from 0 to `optim.lr`, then decay."""

    name: Literal["linear", "cosine", "constant"] = "linear"
    warmup_ratio: float = 0.1  # fraction of all optimizer steps spent warming up
    warmup_steps: int | None = None  # overrides warmup_ratio when given
    min_lr_ratio: float = 0.0  # floor of the decay, as a fraction of lr

    def _check(self) -> list[str]:
        errors = []
        if not 0.0 <= self.warmup_ratio <= 1.0:
            errors.append(f"warmup_ratio must lie in [0, 1], got {self.warmup_ratio}")
        if self.warmup_steps is not None and self.warmup_steps < 0:
            errors.append(f"warmup_steps must be >= 0, got {self.warmup_steps}")
        if not 0.0 <= self.min_lr_ratio <= 1.0:
            errors.append(f"min_lr_ratio must lie in [0, 1], got {self.min_lr_ratio}")
        return errors


@dataclass
class DataSettings:
    """How examples become batches.

    `batch_size` is the GLOBAL micro-batch: summed over all processes, so a recipe gives the
    same optimisation on 1 or N processes (each process takes batch_size / world_size). One
    optimizer step sees batch_size * grad_accum_steps examples.
    """

    batch_size: int = 32
    eval_batch_size: int | None = None  # defaults to 2 * batch_size (no activations kept)
    # dynamic: shuffle, pad each batch to its longest; length_grouped: batches of similar
    # lengths (less padding, still shuffled); packed: several short sequences per row
    # (the task layer then passes a PackingCollator). See docs/training.md.
    batching: Literal["dynamic", "length_grouped", "packed"] = "dynamic"
    # batching=packed: the row length the PackingCollator packs to; batch_size then counts
    # rows of packed sequences instead of examples.
    pack_max_length: int | None = None
    shuffle: bool = True
    drop_last: bool = False
    num_workers: int = 0  # DataLoader workers; 0 keeps collation in the main process

    def _check(self) -> list[str]:
        errors = []
        if self.batch_size < 1:
            errors.append(f"batch_size must be >= 1, got {self.batch_size}")
        if self.eval_batch_size is not None and self.eval_batch_size < 1:
            errors.append(f"eval_batch_size must be >= 1, got {self.eval_batch_size}")
        if self.batching == "packed" and not self.pack_max_length:
            errors.append("batching=packed needs pack_max_length (e.g. 128, the model's max length)")
        if self.pack_max_length is not None and self.pack_max_length < 1:
            errors.append(f"pack_max_length must be >= 1, got {self.pack_max_length}")
        if self.num_workers < 0:
            errors.append(f"num_workers must be >= 0, got {self.num_workers}")
        return errors


@dataclass
class EvalSettings:
    """When to evaluate, which metric picks the best checkpoint, and early stopping."""

    every_steps: int | None = None  # also evaluate every N optimizer steps; None: epochs only
    at_epoch_end: bool = True
    metric: str = "loss"  # a key of compute_metrics' result, or "loss"
    # None: "loss"-like metrics are better when lower, everything else when higher
    greater_is_better: bool | None = None
    early_stopping_patience: int | None = None  # evaluations without improvement; None: off

    def _check(self) -> list[str]:
        errors = []
        if self.every_steps is not None and self.every_steps < 1:
            errors.append(f"every_steps must be >= 1 or null, got {self.every_steps}")
        if self.early_stopping_patience is not None and self.early_stopping_patience < 1:
            errors.append(
                f"early_stopping_patience must be >= 1 or null, got {self.early_stopping_patience}"
            )
        return errors

    @property
    def higher_is_better(self) -> bool:
        if self.greater_is_better is not None:
            return self.greater_is_better
        return not ("loss" in self.metric or "perplexity" in self.metric)


@dataclass
class CheckpointSettings:
    """Resumable checkpoints under OUTPUT_DIR/checkpoints/step-NNNNNNN.

    A checkpoint is written at each evaluation, at each epoch end, every `every_steps`, and
    on SIGINT/SIGTERM. The last `keep_last` plus the best one are kept.
    """

    every_steps: int | None = None
    keep_last: int = 2
    load_best_at_end: bool = True  # the exported model is the best one, not the last

    def _check(self) -> list[str]:
        errors = []
        if self.every_steps is not None and self.every_steps < 1:
            errors.append(f"every_steps must be >= 1 or null, got {self.every_steps}")
        if self.keep_last < 1:
            errors.append(f"keep_last must be >= 1, got {self.keep_last}")
        return errors


@dataclass
class LogSettings:
    """What the run shows and writes (metrics.jsonl is always written)."""

    every_steps: int = 10
    progress_bar: bool = True
    tensorboard: bool = True  # through accelerate's tracker, under OUTPUT_DIR/tensorboard
    plots: bool = True  # loss.png, lr.png, eval.png in OUTPUT_DIR

    def _check(self) -> list[str]:
        if self.every_steps < 1:
            return [f"every_steps must be >= 1, got {self.every_steps}"]
        return []


@dataclass
class TrainSettings:
    """Everything the fine-tuning engine needs to know, none of it task-specific."""

    output_dir: str = "runs/run"
    seed: int = 42
    epochs: float = 3.0  # may be fractional; max_steps wins when both are given
    max_steps: int | None = None
    grad_accum_steps: int = 1
    # auto: bf16 on CUDA Ampere+, fp16 with loss scaling on older CUDA; on CPU bf16 where the
    # CPU has it natively (AVX512-BF16 or AMX), else no (emulated bf16 runs at ~half fp32 speed).
    mixed_precision: MixedPrecision = "auto"
    gradient_checkpointing: bool = False  # recompute activations: less memory, ~30% slower
    cpu: bool = False  # run on CPU even when a GPU is present
    # auto: resume from OUTPUT_DIR's last checkpoint if any; never: refuse a non-empty
    # OUTPUT_DIR; must: fail unless there is a checkpoint. A path resumes that checkpoint.
    resume: str = "auto"
    max_nonfinite_steps: int = 5  # stop after this many NaN/inf losses in a row
    optim: OptimSettings = field(default_factory=OptimSettings)
    schedule: ScheduleSettings = field(default_factory=ScheduleSettings)
    data: DataSettings = field(default_factory=DataSettings)
    eval: EvalSettings = field(default_factory=EvalSettings)
    checkpoint: CheckpointSettings = field(default_factory=CheckpointSettings)
    log: LogSettings = field(default_factory=LogSettings)

    def _check(self) -> list[str]:
        errors = []
        if self.epochs <= 0 and self.max_steps is None:
            errors.append(f"epochs must be > 0 (or give max_steps), got {self.epochs}")
        if self.max_steps is not None and self.max_steps < 1:
            errors.append(f"max_steps must be >= 1 or null, got {self.max_steps}")
        if self.grad_accum_steps < 1:
            errors.append(f"grad_accum_steps must be >= 1, got {self.grad_accum_steps}")
        if self.max_nonfinite_steps < 1:
            errors.append(f"max_nonfinite_steps must be >= 1, got {self.max_nonfinite_steps}")
        if not self.output_dir:
            errors.append("output_dir must not be empty")
        return errors

    def __post_init__(self) -> None:
        # Direct construction (TrainSettings(...)) is validated as strictly as from_dict.
        errors = _collect_checks(self, "")
        if errors:
            raise ConfigError(_format_errors(errors))


# --------------------------------------------------------------------------- validation


def _collect_checks(obj: Any, prefix: str) -> list[str]:
    errors = [f"{prefix}{e}" for e in obj._check()] if hasattr(obj, "_check") else []
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if dataclasses.is_dataclass(value):
            errors += _collect_checks(value, f"{prefix}{f.name}.")
    return errors


def _format_errors(errors: list[str]) -> str:
    head = f"{len(errors)} problem{'s' if len(errors) != 1 else ''} in the training settings:"
    return "\n".join([head, *(f"  - {e}" for e in errors)])


_TRUE = {"true", "yes", "on", "1"}
_FALSE = {"false", "no", "off", "0"}


def _coerce(value: Any, tp: Any, key: str, errors: list[str]) -> Any:
    """Convert `value` to type `tp`, or append a message naming `key` and return None.

    Strings are accepted for numbers and booleans because command-line overrides and some YAML
    spellings (`lr: 3e-5` is a *string* in YAML 1.1) arrive as strings.
    """
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        if isinstance(value, str) and value.lower() in {"null", "none", "~"} and type(None) in args:
            return None
        (inner,) = [a for a in args if a is not type(None)]
        return _coerce(value, inner, key, errors)
    if origin is Literal:
        if value is False and "no" in args:  # YAML 1.1 reads a bare `no` (mixed_precision: no) as false
            return "no"
        if value in args:
            return value
        errors.append(
            f"{key}: {value!r} is not one of {', '.join(map(repr, args))}.{did_you_mean(str(value), map(str, args))}"
        )
        return None
    if dataclasses.is_dataclass(tp):
        if isinstance(value, tp):
            return value
        if not isinstance(value, Mapping):
            errors.append(f"{key}: expected a mapping of {tp.__name__} keys, got {value!r}")
            return None
        return _build(tp, value, f"{key}.", errors)
    if origin is tuple:
        if isinstance(value, str):
            value = [v for v in value.strip("()[] ").split(",") if v.strip()]
        if not isinstance(value, (list, tuple)) or len(value) != len(args):
            errors.append(f"{key}: expected {len(args)} values like [0.9, 0.999], got {value!r}")
            return None
        out = [_coerce(v, a, f"{key}[{i}]", errors) for i, (v, a) in enumerate(zip(value, args))]
        return tuple(out)
    if tp is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
            return value.strip().lower() in _TRUE
        errors.append(f"{key}: expected true or false, got {value!r}")
        return None
    if tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, str):
            try:
                as_float = float(value)
                if as_float.is_integer():
                    return int(as_float)
            except ValueError:
                pass
        errors.append(f"{key}: expected an integer, got {value!r}")
        return None
    if tp is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):
            try:
                return float(value)
            except ValueError:
                pass
        errors.append(f"{key}: expected a number, got {value!r}")
        return None
    if tp is str:
        if isinstance(value, (str, int, float)) and not isinstance(value, bool):
            return str(value)
        errors.append(f"{key}: expected a string, got {value!r}")
        return None
    raise TypeError(f"settings field {key} has an unsupported type {tp!r}")  # a bug in this module


def _build(cls: type, data: Mapping[str, Any], prefix: str, errors: list[str]) -> Any:
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    kwargs = {}
    for key, value in data.items():
        if key not in fields:
            errors.append(
                f"{prefix}{key}: unknown key.{did_you_mean(str(key), fields)}"
                f" Valid keys here: {', '.join(fields)}."
            )
            continue
        before = len(errors)
        coerced = _coerce(value, hints[key], f"{prefix}{key}", errors)
        if len(errors) == before:
            kwargs[key] = coerced
    # Build even when some keys were bad, so that the value checks of the good ones still
    # run and every problem is reported at once. __post_init__ is bypassed here: from_dict
    # runs the same checks itself, with the dotted prefix.
    obj = cls.__new__(cls)
    for name, f in fields.items():
        if name in kwargs:
            val = kwargs[name]
        elif f.default is not dataclasses.MISSING:
            val = f.default
        else:
            val = f.default_factory()  # type: ignore[misc]
        object.__setattr__(obj, name, val)
    return obj


def from_dict(cls: type, data: Mapping[str, Any] | None, *, prefix: str = "") -> Any:
    """Build dataclass `cls` (e.g. TrainSettings) from a nested mapping.

    Raises one ConfigError listing every unknown key (with did-you-mean), every wrong type and
    every bad value, each named by its dotted path (`prefix` is prepended, e.g. "train.").
    """
    errors: list[str] = []
    obj = _build(cls, data or {}, prefix, errors)
    if obj is not None:
        errors += _collect_checks(obj, prefix)
    if errors:
        raise ConfigError(_format_errors(errors))
    return obj


def to_dict(obj: Any) -> dict[str, Any]:
    """The settings as plain data (tuples become lists), ready for YAML or JSON."""

    def plain(v: Any) -> Any:
        if isinstance(v, tuple):
            return [plain(x) for x in v]
        if isinstance(v, dict):
            return {k: plain(x) for k, x in v.items()}
        return v

    return plain(dataclasses.asdict(obj))


# --------------------------------------------------------------------------- overrides


def parse_overrides(items: Sequence[str]) -> list[tuple[str, Any]]:
    """Parse `key.sub=value` strings. Values are read as YAML scalars (`3`, `true`, `null`,
    `[0.9, 0.99]`); types are then checked against the schema by `from_dict`."""
    out, bad = [], []
    for item in items:
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key or any(not part for part in key.split(".")):
            bad.append(f"{item!r}: expected key.sub=value, e.g. optim.lr=3e-5")
            continue
        try:
            value = yaml.safe_load(raw) if raw.strip() else ""
        except yaml.YAMLError:
            value = raw
        out.append((key, value))
    if bad:
        raise ConfigError(_format_errors(bad).replace("training settings", "overrides"))
    return out


def apply_overrides(data: Mapping[str, Any], overrides: Sequence[tuple[str, Any]]) -> dict[str, Any]:
    """Return a deep copy of `data` with each dotted key set (creating nested mappings)."""

    def copy(d: Any) -> Any:
        return {k: copy(v) for k, v in d.items()} if isinstance(d, Mapping) else d

    result = copy(data)
    for key, value in overrides:
        node = result
        *parents, last = key.split(".")
        for i, part in enumerate(parents):
            child = node.get(part)
            if child is None:
                child = node[part] = {}
            elif not isinstance(child, dict):
                raise ConfigError(
                    f"override {key}={value!r}: {'.'.join(parents[: i + 1])} is a value "
                    f"({child!r}), not a section"
                )
            node = child
        node[last] = value
    return result
