"""The recipe schema: what `nlp finetune RECIPE.yaml` reads, checked before any work starts.

A recipe is YAML with five sections::

    task:      {name: text-classification}            # or token-classification, question-answering
    model:     {preset: ernie-3.0-tiny-pico-v2-zh, init: random, config: {num_hidden_layers: 2}}
               # or {name: ernie-3.0-mini-zh}: a hub name or a local model directory
    tokenizer: {train: {vocab_size: 12000}}           # or {name: DIR_OR_HUB_NAME}; default: the model's
    data:      {dataset: reviews-zh, max_length: 128} # or {files: {train: a.json, dev: b.json}}
    train:     {...}                                  # nlp.train.TrainSettings, see docs/training.md

`load_recipe(path, overrides)` reads the YAML, applies `key.sub=value` overrides, and reports
EVERY problem at once in one `ConfigError`: unknown keys (with a did-you-mean), wrong types,
bad values, unknown task / preset / dataset names, missing data files, and an unknown model name
when a `check_model` callable is given (the CLI passes one that asks the hub's registry, which
`nlp.train` may not import). Problems that need the data itself (a label set that does not
match it) are found by `nlp.train.finetune` while reading the data, still before the model is
built or a step is taken.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Literal, Mapping, Sequence

import yaml

from nlp._common import ConfigError, NlpError, did_you_mean
from nlp.train import settings as _settings
from nlp.train.settings import TrainSettings, apply_overrides, parse_overrides, to_dict

__all__ = [
    "Recipe",
    "TaskSection",
    "ModelSection",
    "TokenizerSection",
    "TokenizerTraining",
    "DataSection",
    "load_recipe",
    "recipe_from_dict",
    "recipe_to_dict",
    "check_recipe",
]

TASK_NAMES = ("text-classification", "token-classification", "question-answering")


@dataclass
class TaskSection:
    # text-classification (single texts and pairs), token-classification (NER),
    # question-answering (extractive, SQuAD/CMRC2018 format); aliases: ner, qa, classification
    name: str = "text-classification"


@dataclass
class ModelSection:
    """Where the model comes from: a hub name / local directory, or a preset to build."""

    name: str | None = None  # hub name (`nlp hub ls`), owner/repo, or a local model directory
    preset: str | None = None  # an architecture of nlp.models.PRESETS (with init: random)
    # pretrained: load `name`'s weights (the task head is new); random: fresh weights with the
    # architecture of `preset` (or of `name`'s config.json) -- no pretrained weights needed
    init: Literal["pretrained", "random"] = "pretrained"
    # config overrides, e.g. {num_hidden_layers: 2, hidden_dropout_prob: 0.1, use_crf: true}
    config: dict[str, Any] = field(default_factory=dict)


@dataclass
class TokenizerTraining:
    """Train a jieba+BPE hybrid tokenizer on the training texts (saved into the run dir)."""

    vocab_size: int = 12000  # must exceed 2 x the distinct characters + 5 (reviews-zh: ~8,700)
    word_fraction: float = 0.5  # budget share for whole jieba words (rest: BPE merges)
    min_frequency: int = 2


@dataclass
class TokenizerSection:
    name: str | None = None  # hub name or directory; null: the model's own (model.name)
    train: TokenizerTraining | None = None  # train one on the fly instead


@dataclass
class DataSection:
    """What data, and how examples become features (batching itself is `train.data`)."""

    dataset: str | None = None  # a named dataset (`nlp data ls`): built-in, or public + files
    files: dict[str, str] = field(default_factory=dict)  # split -> local file
    # reader options for local files (nlp.tasks readers), e.g. {text_column: sentence, encoding: gbk}
    reader: dict[str, Any] = field(default_factory=dict)
    label_names: list[str] | None = None  # the label (or tag) set, in id order; checked against the data
    train_split: str = "train"
    dev_split: str | None = "dev"
    test_split: str | None = "test"  # null: no test evaluation (e.g. CLUE's unlabelled test)
    max_length: int = 128  # tokens per example (QA: per window); longer inputs are truncated
    doc_stride: int = 128  # QA: overlap between consecutive windows of a long context
    max_answer_length: int = 30  # QA: longest answer span, in tokens
    max_train_samples: int | None = None  # use the first N training examples (quick runs)
    max_eval_samples: int | None = None  # the first N of dev and test
    label_all_tokens: bool = False  # NER: label every sub-token, not only the first
    # NER: a sentence over max_length tokens is split into pieces (every word kept and scored)
    # or truncated (its tail neither trained on nor scored)
    long_sentences: Literal["split", "truncate"] = "split"

    def _check(self) -> list[str]:
        errors = []
        for name in ("max_length", "doc_stride", "max_answer_length", "max_train_samples", "max_eval_samples"):
            value = getattr(self, name)
            if value is not None and value < 1:
                errors.append(f"{name} must be >= 1, got {value}")
        return errors


@dataclass
class Recipe:
    task: TaskSection = field(default_factory=TaskSection)
    model: ModelSection = field(default_factory=ModelSection)
    tokenizer: TokenizerSection = field(default_factory=TokenizerSection)
    data: DataSection = field(default_factory=DataSection)
    train: TrainSettings = field(default_factory=TrainSettings)
    source: str | None = field(default=None, compare=False)  # the file it was read from


# --------------------------------------------------------------------------- schema


def _coerce(value: Any, tp: Any, key: str, errors: list[str]) -> Any:
    """The engine's coercion (numbers, bools, Literals, nested dataclasses), plus the free-form
    mappings and lists recipes need."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType) and type(None) in args:
        if value is None or (isinstance(value, str) and value.lower() in {"null", "none", "~"}):
            return None
        (inner,) = [a for a in args if a is not type(None)]
        return _coerce(value, inner, key, errors)
    if origin is dict:
        if not isinstance(value, Mapping):
            errors.append(f"{key}: expected a mapping (key: value), got {value!r}")
            return None
        if args and args[1] is str:
            bad = [k for k, v in value.items() if not isinstance(v, (str, int, float)) or isinstance(v, bool)]
            if bad:
                errors.append(f"{key}: expected text values, got {', '.join(f'{k}={value[k]!r}' for k in bad)}")
                return None
            return {str(k): str(v) for k, v in value.items()}
        return {str(k): v for k, v in value.items()}
    if origin is list:
        if isinstance(value, str):
            value = [v.strip() for v in value.split(",") if v.strip()]
        if not isinstance(value, (list, tuple)):
            errors.append(f"{key}: expected a list like [a, b], got {value!r}")
            return None
        return [str(v) for v in value]
    if dataclasses.is_dataclass(tp) and tp is not TrainSettings:
        if isinstance(value, tp):
            return value
        if not isinstance(value, Mapping):
            errors.append(f"{key}: expected a mapping of {', '.join(f.name for f in dataclasses.fields(tp))}, got {value!r}")
            return None
        return _build(tp, value, f"{key}.", errors)
    return _settings._coerce(value, tp, key, errors)


def _build(cls: type, data: Mapping[str, Any], prefix: str, errors: list[str]) -> Any:
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init and f.name != "source"}
    values: dict[str, Any] = {}
    for key, value in data.items():
        if key not in fields:
            errors.append(f"{prefix}{key}: unknown key.{did_you_mean(str(key), fields)}"
                          f" Valid keys here: {', '.join(fields)}.")
            continue
        if hints[key] is TrainSettings:
            if value is not None and not isinstance(value, Mapping):
                errors.append(f"{prefix}{key}: expected a mapping of training settings, got {value!r}")
                continue
            obj = _settings._build(TrainSettings, value or {}, f"{prefix}{key}.", errors)
            errors += _settings._collect_checks(obj, f"{prefix}{key}.")
            values[key] = obj
            continue
        before = len(errors)
        coerced = _coerce(value, hints[key], f"{prefix}{key}", errors)
        if len(errors) == before or dataclasses.is_dataclass(coerced):  # keep a section with bad keys
            values[key] = coerced
    obj = cls.__new__(cls)
    for name, f in fields.items():
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()  # type: ignore[misc]
        object.__setattr__(obj, name, values.get(name, default))
    if cls is Recipe:
        object.__setattr__(obj, "source", None)
    if hasattr(obj, "_check"):
        errors += [f"{prefix}{e}" for e in obj._check()]
    return obj


def _format(errors: list[str], source: str | None) -> str:
    where = f" in {source}" if source else ""
    head = f"{len(errors)} problem{'s' if len(errors) != 1 else ''}{where}:"
    return "\n".join([head, *(f"  - {e}" for e in errors)])


def recipe_from_dict(data: Mapping[str, Any] | None, *, source: str | None = None,
                     check_model: Callable[[str], None] | None = None,
                     base_dir: str | Path | None = None) -> Recipe:
    """Build and check a Recipe; one ConfigError lists every problem (see `check_recipe`)."""
    errors: list[str] = []
    if data is not None and not isinstance(data, Mapping):
        raise ConfigError(f"{source or 'the recipe'}: expected a mapping of sections "
                          f"(task, model, tokenizer, data, train), got {type(data).__name__}")
    recipe = _build(Recipe, data or {}, "", errors)
    recipe.source = source
    errors += check_recipe(recipe, check_model=check_model, base_dir=base_dir)
    if errors:
        raise ConfigError(_format(errors, source))
    return recipe


def load_recipe(path: str | Path, overrides: Sequence[str] = (), *,
                check_model: Callable[[str], None] | None = None) -> Recipe:
    """Read a recipe file, apply `key.sub=value` overrides, build and check it.

    Relative data paths are read relative to the current directory (where the command runs),
    as a user typing a path expects.
    """
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"recipe {str(path)!r} does not exist. See `nlp recipes ls` for the "
                          "built-in ones and `nlp recipes cp NAME DEST` to copy one.")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as err:
        raise ConfigError(f"{path} is not valid YAML: {err}") from None
    data = apply_overrides(data or {}, parse_overrides(list(overrides)))
    return recipe_from_dict(data, source=str(path), check_model=check_model)


def recipe_to_dict(recipe: Recipe) -> dict[str, Any]:
    """Plain data (what `recipe.yaml` in the run directory holds)."""
    out = {f.name: to_dict(getattr(recipe, f.name)) for f in dataclasses.fields(recipe) if f.name != "source"}
    return out


# --------------------------------------------------------------------------- semantic checks


def check_recipe(recipe: Recipe, *, check_model: Callable[[str], None] | None = None,
                 base_dir: str | Path | None = None) -> list[str]:
    """Problems a recipe has that its types do not show, as messages naming the key."""
    errors: list[str] = []
    from nlp.tasks.registry import get_task

    spec = None
    try:
        spec = get_task(recipe.task.name)
        recipe.task.name = spec.name
    except NlpError as err:
        errors.append(f"task.name: {err}")
    errors += _check_model(recipe.model, check_model)
    tok = recipe.tokenizer
    if tok.name is not None and tok.train is not None:
        errors.append("tokenizer: give either tokenizer.name (an existing tokenizer) or "
                      "tokenizer.train (train one), not both")
    if tok.name is None and tok.train is None and recipe.model.name is None:
        errors.append("tokenizer: the model is built from a preset, which has no tokenizer; set "
                      "tokenizer.train: {vocab_size: 12000} to train one on the training texts, "
                      "or tokenizer.name to a tokenizer directory or hub name")
    if tok.name is not None and check_model is not None and not Path(tok.name).expanduser().is_dir():
        try:
            check_model(tok.name)
        except NlpError as err:
            errors.append(f"tokenizer.name: {err}")
    if tok.train is not None:
        if tok.train.vocab_size < 100:
            errors.append(f"tokenizer.train.vocab_size must be >= 100, got {tok.train.vocab_size}")
        if not 0.0 <= tok.train.word_fraction <= 1.0:
            errors.append(f"tokenizer.train.word_fraction must lie in [0, 1], got {tok.train.word_fraction}")
        if tok.train.min_frequency < 1:
            errors.append(f"tokenizer.train.min_frequency must be >= 1, got {tok.train.min_frequency}")
    errors += _check_data(recipe.data, base_dir)
    if spec is not None:
        errors += spec.check_data(recipe.data)  # what only this task needs (QA: doc_stride < max_length)
    return errors


def _check_model(model: ModelSection, check_model: Callable[[str], None] | None) -> list[str]:
    from nlp.models import PRESETS

    errors = []
    if model.name is None and model.preset is None:
        errors.append("model: give model.name (a hub name or model directory) or model.preset "
                      f"with model.init: random (presets: {', '.join(list(PRESETS)[:6])}, ...)")
    if model.name is not None and model.preset is not None:
        errors.append("model: give model.name or model.preset, not both")
    if model.preset is not None:
        if model.preset not in PRESETS:
            errors.append(f"model.preset: unknown preset {model.preset!r}.{did_you_mean(model.preset, PRESETS)} "
                          f"Valid: {', '.join(PRESETS)}.")
        if model.init != "random":
            errors.append(f"model.init: a preset has no weights; set model.init: random to train "
                          f"{model.preset!r} from scratch, or give model.name to load pretrained weights")
    if model.name is not None and check_model is not None and not Path(model.name).expanduser().is_dir():
        try:
            check_model(model.name)
        except NlpError as err:
            errors.append(f"model.name: {err}")
    elif model.name is not None and check_model is None and not Path(model.name).expanduser().is_dir():
        # Without the hub (library use), only local directories can be loaded.
        if "/" in model.name or model.name.startswith((".", "~")):
            errors.append(f"model.name: {model.name!r} is not a directory")
    return errors


def _check_data(data: DataSection, base_dir: str | Path | None) -> list[str]:
    from nlp.tasks.datasets import BUILTIN, list_datasets

    errors = []
    if data.dataset is None and not data.files:
        errors.append("data: give data.dataset (a name from `nlp data ls`) or data.files "
                      "({train: PATH, dev: PATH, test: PATH})")
    if data.dataset is not None:
        key = data.dataset.lower()
        if key not in list_datasets():
            errors.append(f"data.dataset: unknown dataset {data.dataset!r}."
                          f"{did_you_mean(key, list_datasets())} See `nlp data ls`.")
        elif key in BUILTIN and data.files:
            errors.append(f"data.files: {data.dataset!r} is built in (read from installed packages); "
                          "drop data.files, or drop data.dataset to read your own files")
    for split, path in data.files.items():
        full = Path(base_dir, path) if base_dir else Path(path)
        if not full.expanduser().is_file():
            errors.append(f"data.files.{split}: file {str(full)!r} does not exist")
    if data.files:
        for key, split in (("train_split", data.train_split), ("dev_split", data.dev_split),
                           ("test_split", data.test_split)):
            if split is not None and split not in data.files:
                if key == "train_split":
                    errors.append(f"data.files has no {split!r} file (data.train_split); give "
                                  f"data.files.{split}: PATH. Splits given: {', '.join(data.files)}.")
                elif data.dataset is None:
                    errors.append(f"data.{key}={split!r} is not among data.files ({', '.join(data.files)}); "
                                  f"add data.files.{split}: PATH or set data.{key}: null")
    return errors
