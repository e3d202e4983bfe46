"""The recipe schema: what `nlp finetune RECIPE.yaml` reads, checked before any work starts.

A recipe is YAML with five sections::

    task:      {name: text-classification}            # or token-classification, question-answering
    model:     {preset: ernie-3.0-tiny-pico-v2-zh, init: random, config: {num_hidden_layers: 2}}
               # or {name: ernie-3.0-mini-zh}: a hub name or a local model directory
    tokenizer: {train: {vocab_size: 12000}}           # or {name: DIR_OR_HUB_NAME}; default: the model's
    data:      {dataset: reviews-zh, max_length: 128} # or {files: {train: a.json, dev: b.json}}
    train:     {...}                                  # nlp.train.TrainSettings, see docs/training.md

`load_recipe(path, overrides)` reads the YAML, applies `key.sub=value` overrides (both through
the schema engine, `nlp.train.schema`, which the pretraining recipe shares), and reports
EVERY problem at once in one `ConfigError`: unknown keys (with a did-you-mean), wrong types,
bad values, unknown task / preset / dataset names, missing data files, a model architecture
that cannot be built, and an unknown model name when a `check_model` callable is given (the
CLI passes one that asks the hub's registry, which `nlp.train` may not import). Problems that
need the data itself (a label set that does not match it) are found by `nlp.train.finetune`
while reading the data, still before the model is built or a step is taken.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Literal, Mapping, Sequence

from nlp._common import ConfigError, NlpError, did_you_mean
from nlp.train.schema import Problem, Settings, build, format_problems, read_yaml, to_dict
from nlp.train.settings import TrainSettings

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
    "check_model_section",
]

@dataclass
class TaskSection(Settings):
    # text-classification (single texts and pairs), token-classification (NER),
    # question-answering (extractive, SQuAD/CMRC2018 format); aliases: ner, qa, classification
    name: str = "text-classification"


@dataclass
class ModelSection(Settings):
    """Where the model comes from: a hub name / local directory, or a preset to build."""

    name: str | None = None  # hub name (`nlp hub ls`), owner/repo, or a local model directory
    preset: str | None = None  # an architecture of nlp.models.PRESETS (with init: random)
    # pretrained: load `name`'s weights (the task head is new); random: fresh weights with the
    # architecture of `preset` (or of `name`'s config.json) -- no pretrained weights needed
    init: Literal["pretrained", "random"] = "pretrained"
    # config overrides, e.g. {num_hidden_layers: 2, hidden_dropout_prob: 0.1, use_crf: true}
    config: dict[str, Any] = field(default_factory=dict)


@dataclass
class TokenizerTraining(Settings):
    """Train a jieba+BPE hybrid tokenizer on the training texts (saved into the run dir)."""

    vocab_size: int = 12000  # must exceed 2 x the distinct characters + 5 (reviews-zh: ~8,700)
    word_fraction: float = 0.5  # budget share for whole jieba words (rest: BPE merges)
    min_frequency: int = 2

    def problems(self) -> Iterator[Problem]:
        if self.vocab_size < 100:
            yield Problem("vocab_size", f"vocab_size must be >= 100, got {self.vocab_size}")
        if not 0.0 <= self.word_fraction <= 1.0:
            yield Problem("word_fraction", f"word_fraction must lie in [0, 1], got {self.word_fraction}")
        if self.min_frequency < 1:
            yield Problem("min_frequency", f"min_frequency must be >= 1, got {self.min_frequency}")


@dataclass
class TokenizerSection(Settings):
    name: str | None = None  # hub name or directory; null: the model's own (model.name)
    train: TokenizerTraining | None = None  # train one on the fly instead


@dataclass
class DataSection(Settings):
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

    def problems(self) -> Iterator[Problem]:
        for name in ("max_length", "doc_stride", "max_answer_length", "max_train_samples", "max_eval_samples"):
            value = getattr(self, name)
            if value is not None and value < 1:
                yield Problem(name, f"{name} must be >= 1, got {value}")


@dataclass
class Recipe(Settings):
    task: TaskSection = field(default_factory=TaskSection)
    model: ModelSection = field(default_factory=ModelSection)
    tokenizer: TokenizerSection = field(default_factory=TokenizerSection)
    data: DataSection = field(default_factory=DataSection)
    train: TrainSettings = field(default_factory=TrainSettings)
    # the file it was read from; not a setting (init=False): neither read nor written as one
    source: str | None = field(default=None, compare=False, init=False)


def recipe_from_dict(data: Mapping[str, Any] | None, *, source: str | None = None,
                     check_model: Callable[[str], None] | None = None,
                     base_dir: str | Path | None = None) -> Recipe:
    """Build and check a Recipe; one ConfigError lists every problem (see `check_recipe`)."""
    errors: list[str] = []
    recipe = build(Recipe, data, errors, source=source)
    recipe.source = source
    errors += check_recipe(recipe, check_model=check_model, base_dir=base_dir)
    if errors:
        raise ConfigError(format_problems(errors, source))
    return recipe


def load_recipe(path: str | Path, overrides: Sequence[str] = (), *,
                check_model: Callable[[str], None] | None = None) -> Recipe:
    """Read a recipe file, apply `key.sub=value` overrides, build and check it.

    Relative data paths are read relative to the current directory (where the command runs),
    as a user typing a path expects.
    """
    data = read_yaml(path, overrides, missing_hint="See `nlp recipes ls` for the built-in ones and "
                                                   "`nlp recipes cp NAME DEST` to copy one.")
    return recipe_from_dict(data, source=str(path), check_model=check_model)


def recipe_to_dict(recipe: Recipe) -> dict[str, Any]:
    """Plain data (what `recipe.yaml` in the run directory holds)."""
    return to_dict(recipe)


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
    errors += check_model_section(recipe.model, check_model)
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
    errors += _check_data(recipe.data, base_dir)
    if spec is not None:
        errors += spec.check_data(recipe.data)  # what only this task needs (QA: doc_stride < max_length)
    return errors


def check_model_section(model: ModelSection, check_model: Callable[[str], None] | None = None) -> list[str]:
    """Problems of a model section (of a fine-tuning or a pretraining recipe): where the model
    comes from, and whether its architecture (the preset's or a local config.json, with
    `model.config` applied) is one that can be built. `check_model` asks the hub about a name
    that is not a local directory (UnknownNameError with a did-you-mean)."""
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
    if not errors:
        errors += _check_architecture(model)
    return errors


def _check_architecture(model: ModelSection) -> list[str]:
    """The config the model will be built from, checked now (sizes included: an absurd one
    would otherwise allocate until the machine runs out of memory, after the data is read).
    A hub name's config.json is checked when it is downloaded, before the model is built."""
    from nlp.models import ErnieConfig, preset_config

    with_config = " (with model.config)" if model.config else ""
    try:
        if model.preset is not None:
            preset_config(model.preset, **model.config)
        elif model.name is not None and (Path(model.name).expanduser() / "config.json").is_file():
            ErnieConfig.from_pretrained(Path(model.name).expanduser(), **model.config)
    except (TypeError, ValueError) as err:  # ConfigError, or a key ErnieConfig cannot take
        return [f"model.config: {err}" if model.preset is not None else f"model{with_config}: {err}"]
    return []


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
