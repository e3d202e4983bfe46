"""The recipe schema: what `nlp finetune RECIPE.yaml` reads, checked before any work starts.

A recipe is YAML with five sections (and an optional sixth, `distill:`); its first line is a comment with the command that runs it
(`# nlp finetune recipes/NAME.yaml`, checked by the tests)::

    task:      {name: text-classification}            # or token-classification, question-answering,
               # with the task's own knobs: {name: qa, doc_stride: 128, max_answer_length: 30}
    model:     {preset: ernie-3.0-tiny-pico-v2-zh, init: random, config: {num_hidden_layers: 2}}
               # or {name: ernie-3.0-mini-zh}: a hub name or a local model directory
    tokenizer: {train: {vocab_size: 12000}}           # or {name: DIR_OR_HUB_NAME}; default: the model's
    data:      {dataset: reviews-zh, max_length: 128} # or {files: {train: a.json, dev: b.json}}
    train:     {...}                                  # nlp.train.TrainSettings, see docs/training.md
    distill:   {teacher: runs/sentiment-reviews}      # optional: learn from a fine-tuned teacher too
               # (DistillSection below, nlp/train/distill.py, docs/compress.md)

`load_recipe(path, overrides)` reads the YAML, applies `key.sub=value` overrides (both through
the schema engine, `nlp.train.schema`, which the pretraining recipe shares), and reports
EVERY problem at once in one `ConfigError`: unknown keys (with a did-you-mean), wrong types,
bad values, unknown task / preset / dataset names, missing data files, a model architecture
that cannot be built, and an unknown model name when a `check_model` callable is given (the
CLI passes one that asks the hub's registry, which `nlp.train` may not import). Problems that
need the data itself (a label set that does not match it) are found by `nlp.train.finetune`
while reading the data, still before the model is built or a step is taken.

The task section is built as its task's own settings class (`TaskSpec.settings`, a
`TaskSettings` subclass: QA's `doc_stride` and `max_answer_length`, NER's `label_all_tokens`,
`long_sentences` and `use_crf`), so an unknown key gets the task's valid keys and a did-you-mean.
A data-section key that a task declares in its spec's `data_keys_moved` (how older recipes and
run directories spell one of its task settings, `data.<key>`) is read as that task setting with a deprecation warning
(`migrate_recipe`); in a task without that setting it is refused, naming the task key.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Literal, Mapping, Sequence

from nlp._common import ConfigError, NlpError, did_you_mean
from nlp.tasks.spec import DEFAULT_TASK, TaskSettings, TaskSpec
from nlp.train.schema import Problem, Settings, build, format_problems, read_yaml, to_dict
from nlp.train.settings import TrainSettings

__all__ = [
    "Recipe",
    "TaskSection",
    "ModelSection",
    "TokenizerSection",
    "TokenizerTraining",
    "DataSection",
    "DistillSection",
    "AugmentSection",
    "load_recipe",
    "recipe_from_dict",
    "recipe_to_dict",
    "check_recipe",
    "check_model_section",
    "migrate_recipe",
    "build_task_settings",
    "moved_to_task",
]

logger = logging.getLogger(__name__)

# The recipe's task section: the task's own settings class (TaskSpec.settings), built by
# `build_task_settings`; TaskSettings holds only `name`.
TaskSection = TaskSettings

def moved_to_task() -> tuple[str, ...]:
    """The data-section keys that became task settings, as the tasks declare them
    (`TaskSpec.data_keys_moved`): old recipes and run directories keep working."""
    from nlp.tasks.registry import get_task, list_tasks

    return tuple(dict.fromkeys(k for name in list_tasks() for k in get_task(name).data_keys_moved))


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
    # with init: pretrained, the encoder layers of `name` to keep, in order: layer i of the model
    # is layer layer_map[i] of name's, e.g. [0, 2, 4] makes 3 layers of a 6-layer model (a
    # smaller student for distill:, docs/compress.md); embeddings and the head are kept
    layer_map: list[int] | None = None


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
    # local files in the task's format whose records join the train split (after it, in order;
    # read with `reader`): e.g. a teacher's labels for unlabelled text, `nlp predict --format
    # training` (docs/compress.md, "Distilling on more text"). Dev and test are never extended
    extra_train: list[str] = field(default_factory=list)
    label_names: list[str] | None = None  # the label (or tag) set, in id order; checked against the data
    train_split: str = "train"
    dev_split: str | None = "dev"
    test_split: str | None = "test"  # null: no test evaluation (e.g. CLUE's unlabelled test)
    max_length: int = 128  # tokens per example (QA: per window); longer inputs are truncated
    max_train_samples: int | None = None  # use the first N training examples (quick runs)
    max_eval_samples: int | None = None  # the first N of dev and test
    # a task's own knobs (task.doc_stride, ...) are in the task section, not here

    def problems(self) -> Iterator[Problem]:
        for name in ("max_length", "max_train_samples", "max_eval_samples"):
            value = getattr(self, name)
            if value is not None and value < 1:
                yield Problem(name, f"{name} must be >= 1, got {value}")


@dataclass
class AugmentSection(Settings):
    """Data augmentation for distillation: TinyBERT's word replacement (nlp/train/augment.py,
    docs/compress.md). Each training example gets `copies` rewritten copies, which learn the
    teacher's outputs only (their labels are not trusted). Sentence-level tasks only (those whose
    spec names `augment_columns`); refused for the others."""

    copies: int = 1  # rewritten copies per training example (TinyBERT: 20); each is one more pass of the set per epoch
    p: float = 0.4  # the chance that a word is replaced (TinyBERT's p_t)
    candidates: int = 15  # a replacement is drawn uniformly from this many candidates (TinyBERT's K)
    # a masked-LM model directory (e.g. nlp/assets/ernie-tiny-zh; its own tokenizer): a
    # single-character word is replaced by one of its top predictions at that position, masked;
    # null: by the dictionary rule as longer words (a jieba dictionary word of the same
    # part-of-speech tag and length, near in frequency: jieba has no thesaurus)
    mlm: str | None = None
    seed: int | None = None  # null: train.seed. The copies depend on the seed alone (and the data)

    def problems(self) -> Iterator[Problem]:
        if self.copies < 1:
            yield Problem("copies", f"copies must be >= 1, got {self.copies}")
        if not 0.0 < self.p <= 1.0:
            yield Problem("p", f"p must lie in (0, 1], got {self.p}")
        if self.candidates < 1:
            yield Problem("candidates", f"candidates must be >= 1, got {self.candidates}")


LAYER_RULES = ("last", "uniform")  # distill.layer_pairs by rule (else a list of [student, teacher] pairs)
RELATION_KINDS = ("query", "key", "value")  # MiniLM v2's self-attention relations


@dataclass
class DistillSection(Settings):
    """Knowledge distillation: the model being fine-tuned (the student) also learns the outputs
    of a fine-tuned teacher of the same task and labels (nlp/train/distill.py, docs/compress.md).
    The loss is hard_weight * the task's own loss + soft_weight * the soft-target loss (KL at
    `temperature`, times temperature^2) + hidden_weight * the MSE of each pair of `layer_pairs`
    (projected student hidden states against the teacher's) + relation_weight * MiniLM v2's
    self-attention relation loss at `relation_layers`."""

    # a fine-tuned run or model directory of the same task, labels and tokenizer (a hub name
    # through the nlp CLI)
    teacher: str = ""
    temperature: float = 2.0  # > 1 softens both distributions: more of the teacher's ranking is learned
    soft_weight: float = 1.0  # the teacher's soft targets
    hard_weight: float = 1.0  # the labels (0: learn from the teacher alone)
    # hidden states of the layer pairs, each through a learned linear projection (student width ->
    # teacher width; kept out of the saved student). > 0 (or relation_weight > 0) runs the teacher
    # on every batch (hidden states of a whole training set are too large to cache; its outputs
    # alone are cached)
    hidden_weight: float = 0.0
    # which student layer learns which teacher layer's hidden states: "last" (the last to the last),
    # "uniform" (TinyBERT's: student layer i of M to teacher layer (i+1)*N/M - 1 of N), or a list of
    # [student, teacher] pairs, 0-based, negative from the last, e.g. [[0, 2], [1, 5]]
    layer_pairs: Any = "last"
    # MiniLM v2: KL between the student's and the teacher's query-query, key-key and value-value
    # relations (softmax(X X^T / sqrt(d)) per relation head) of one layer each; any widths and
    # head counts. > 0 runs the teacher on every batch
    relation_weight: float = 0.0
    relation_layers: tuple[int, int] = (-1, -1)  # [student layer, teacher layer]; MiniLM v2 takes the
    # teacher's last layer for base-size teachers, an upper-middle one for large ones
    relation_heads: int | None = None  # both widths split into this many; null: the teacher's attention heads
    relations: list[str] = field(default_factory=lambda: list(RELATION_KINDS))  # which of query, key, value
    augment: AugmentSection | None = None  # rewritten copies of the training examples (TinyBERT)
    teacher_batch_size: int = 64  # the one pass that caches the teacher's outputs
    # that pass gives the teacher what it was trained to see with every input where the
    # student's features lack it (an embedding teacher's declared query/passage prompts: e5's
    # vectors of unprompted text are not the ones it retrieves with); false: the student's inputs
    teacher_prompts: bool = True
    # sentence embeddings (retrieval records): > 0 also learns the teacher's ranking, each query's
    # softmax over the batch's candidate texts by cosine, KL(teacher || student); the student's
    # cosines at its contrastive_temperature, the teacher's at ranking_temperature (null: the
    # teacher's contrastive_temperature). Regressing vectors (soft_weight) does not carry a ranking
    ranking_weight: float = 0.0
    ranking_temperature: float | None = None

    def problems(self) -> Iterator[Problem]:
        # the teacher is checked by check_recipe (an empty one is the defaults', validated alone)
        if not self.temperature > 0:
            yield Problem("temperature", f"temperature must be > 0, got {self.temperature}")
        weights = ("soft_weight", "hard_weight", "hidden_weight", "relation_weight", "ranking_weight")
        for name in weights:
            if not getattr(self, name) >= 0:
                yield Problem(name, f"{name} must be >= 0, got {getattr(self, name)}")
        if all(getattr(self, name) == 0 for name in weights):
            yield Problem("soft_weight", "soft_weight, hard_weight, hidden_weight, relation_weight and ranking_weight "
                                         "are all 0: nothing to learn; set soft_weight (the teacher's outputs) or "
                                         "hard_weight (the labels) above 0")
        if self.ranking_temperature is not None and not self.ranking_temperature > 0:
            yield Problem("ranking_temperature", f"ranking_temperature must be > 0 (or null), got "
                                                 f"{self.ranking_temperature}")
        if self.teacher_batch_size < 1:
            yield Problem("teacher_batch_size", f"teacher_batch_size must be >= 1, got {self.teacher_batch_size}")
        yield from _layer_pair_problems(self.layer_pairs)
        if self.relation_heads is not None and self.relation_heads < 1:
            yield Problem("relation_heads", f"relation_heads must be >= 1 (or null), got {self.relation_heads}")
        bad = [r for r in self.relations if r not in RELATION_KINDS]
        if bad or not self.relations:
            hint = did_you_mean(bad[0], RELATION_KINDS) if bad else ""
            yield Problem("relations", f"relations must be a non-empty list of {', '.join(RELATION_KINDS)}, got "
                                       f"{self.relations!r}.{hint}")
        if self.augment is not None and self.soft_weight == self.hidden_weight == self.relation_weight == 0:
            yield Problem("augment", "augment: the rewritten copies learn from the teacher alone (their labels are "
                                     "not trusted), but soft_weight, hidden_weight and relation_weight are all 0; "
                                     "set soft_weight above 0 or drop augment")


def _layer_pair_problems(value: Any) -> Iterator[Problem]:
    if isinstance(value, str):
        if value not in LAYER_RULES:
            yield Problem("layer_pairs", f"layer_pairs: {value!r} is not a rule ({', '.join(LAYER_RULES)}) nor a "
                                         f"list of [student, teacher] pairs.{did_you_mean(value, LAYER_RULES)}")
        return
    ok = isinstance(value, (list, tuple)) and value and all(
        isinstance(p, (list, tuple)) and len(p) == 2 and all(isinstance(i, int) and not isinstance(i, bool) for i in p)
        for p in value)
    if not ok:
        yield Problem("layer_pairs", f"layer_pairs must be last, uniform or a non-empty list of [student, teacher] "
                                     f"layer pairs such as [[0, 2], [1, 5]], got {value!r}")
    elif len({tuple(p) for p in value}) != len(value):
        yield Problem("layer_pairs", f"layer_pairs lists a pair twice: {value!r}")


@dataclass
class Recipe(Settings):
    task: TaskSettings = field(default_factory=TaskSettings)
    model: ModelSection = field(default_factory=ModelSection)
    tokenizer: TokenizerSection = field(default_factory=TokenizerSection)
    data: DataSection = field(default_factory=DataSection)
    train: TrainSettings = field(default_factory=TrainSettings)
    distill: DistillSection | None = None  # learn from a fine-tuned teacher too (knowledge distillation)
    # the file it was read from; not a setting (init=False): neither read nor written as one
    source: str | None = field(default=None, compare=False, init=False)


def recipe_from_dict(data: Mapping[str, Any] | None, *, source: str | None = None,
                     check_model: Callable[[str], None] | None = None,
                     base_dir: str | Path | None = None) -> Recipe:
    """Build and check a Recipe; one ConfigError lists every problem (see `check_recipe`)."""
    errors: list[str] = []
    data = migrate_recipe(data, errors, source=source)
    if isinstance(data, dict) and (isinstance(data.get("task"), Mapping) or data.get("task") is None):
        data["task"] = build_task_settings(data.get("task"), errors)
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


def _task_spec(name: Any) -> TaskSpec | None:
    from nlp.tasks.registry import get_task

    try:
        return get_task(str(name))
    except NlpError:
        return None  # check_recipe reports the unknown name


def migrate_recipe(data: Mapping[str, Any] | None, errors: list[str] | None = None, *,
                   source: str | None = None) -> dict[str, Any]:
    """A copy of a recipe mapping with the task knobs of its data section (`moved_to_task()`)
    moved into its task section, each with a deprecation warning; a knob the task does not have
    (or one given in both places) is appended to `errors` naming the new key."""
    out = {k: v for k, v in (data or {}).items()} if isinstance(data, Mapping) else data
    if not isinstance(out, dict) or not isinstance(out.get("data"), Mapping):
        return out
    legacy = moved_to_task()
    moved = [k for k in legacy if k in out["data"]]
    if not moved:
        return out
    task = out.get("task") if isinstance(out.get("task"), Mapping) else {}
    task = dict(task or {})
    spec = _task_spec(task.get("name", DEFAULT_TASK))
    fields = {f.name for f in dataclasses.fields(spec.settings)} if spec is not None else set(legacy)
    out["data"] = {k: v for k, v in out["data"].items() if k not in moved}
    for key in moved:
        value = data["data"][key]  # type: ignore[index]
        if key in task:
            msg = f"data.{key}: moved to task.{key}, which this recipe also sets; remove data.{key}"
        elif key not in fields:
            msg = (f"data.{key}: moved to task.{key}, which {spec.name if spec else 'this task'} does not have "
                   f"(its task settings: {', '.join(sorted(fields - {'name'})) or 'none'}); remove data.{key}")
        else:
            task[key] = value
            logger.warning("%sdata.%s is deprecated: it is a task setting now; write task.%s: %r",
                           f"{source}: " if source else "", key, key, value)
            continue
        if errors is None:
            raise ConfigError(msg)
        errors.append(msg)
    out["task"] = task
    return out


def build_task_settings(section: Mapping[str, Any] | None, errors: list[str]) -> TaskSettings:
    """The recipe's task section as its task's own settings class (unknown keys get the task's
    valid keys and a did-you-mean in `errors`); the base TaskSettings when the name is unknown."""
    section = dict(section or {})
    spec = _task_spec(section.get("name", DEFAULT_TASK))
    if spec is None:  # check_recipe reports the name; the other keys cannot be checked without it
        return TaskSettings(name=str(section.get("name")))
    return build(spec.settings, section, errors, prefix="task.")


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
        if not isinstance(recipe.task, spec.settings):  # a Recipe built in code with TaskSettings(name)
            recipe.task = spec.settings(name=spec.name)
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
    if spec is not None and not spec.needs_model:
        errors.append(f"task.name: {spec.name} needs no model and is not fine-tuned; "
                      f"use nlp.pipeline({spec.name!r})")
    errors += _check_data(recipe.data, base_dir)
    errors += _check_student(recipe, check_model)
    if spec is not None and recipe.distill is not None and recipe.distill.augment is not None \
            and not spec.augment_columns:
        errors.append(f"distill.augment: {spec.name} examples are not rewritten: word replacement applies to "
                      "sentence-level tasks (a task spec's augment_columns), where no label points into the "
                      "text; per-token tags or answer offsets would no longer line up. Drop distill.augment")
    if spec is not None:
        errors += spec.check_data(recipe.data, recipe.task)  # what only this task needs (QA: doc_stride < max_length)
        errors += config_contradictions(spec, recipe)
    return errors


def config_contradictions(spec: Any, recipe: Recipe, label_names: list[str] | None = None,
                          train: Any = None) -> list[str]:
    """Config fields the task section decides (NER's `task.use_crf`) that `model.config` sets to
    something else: refused, since either one silently winning drops what the user asked. Checked
    when the recipe is read, and again with the data's labels when the model is built."""
    decided = spec.head_config(label_names, train, recipe.task)
    without_settings = spec.head_config(label_names, train)
    config = recipe.model.config
    return [f"model.config.{key}={config[key]!r} contradicts the task section, which makes {key}={value!r}; "
            f"set it in one place (remove model.config.{key}) or make the two agree"
            for key, value in decided.items()
            if (key not in without_settings or without_settings[key] != value)
            and key in config and config[key] != value]


def _check_student(recipe: Recipe, check_model: Callable[[str], None] | None) -> list[str]:
    """model.layer_map and the distill section beside the rest of the recipe (`check_model`: as
    check_recipe's, for a teacher that is not a local directory)."""
    errors = []
    m = recipe.model
    if m.layer_map is not None:
        if m.init != "pretrained" or m.name is None:
            errors.append("model.layer_map picks layers of a loaded model: it needs model.name and "
                          "model.init: pretrained (a preset's layers have no weights to keep)")
        elif not m.layer_map or any(isinstance(i, bool) or not isinstance(i, int) or i < 0 for i in m.layer_map):
            errors.append(f"model.layer_map must be a non-empty list of layer indices >= 0, got {m.layer_map!r}")
        if "num_hidden_layers" in m.config:
            errors.append("model: give model.layer_map or model.config.num_hidden_layers, not both (the layer "
                          "map's length is the number of layers)")
    if recipe.distill is not None and not recipe.distill.teacher:
        errors.append("distill.teacher is required: the fine-tuned run or model directory to learn from")
    elif recipe.distill is not None and not Path(recipe.distill.teacher).expanduser().is_dir():
        if check_model is None:
            errors.append(f"distill.teacher {recipe.distill.teacher!r} is not a directory; give a fine-tuned run "
                          "(train.output_dir) or model directory (a hub name needs the nlp CLI)")
        else:
            try:
                check_model(recipe.distill.teacher)
            except NlpError as err:
                errors.append(f"distill.teacher: {err}")
    augment = recipe.distill.augment if recipe.distill is not None else None
    if augment is not None and augment.mlm is not None and not Path(augment.mlm).expanduser().is_dir():
        errors.append(f"distill.augment.mlm {augment.mlm!r} is not a directory; give a masked-LM model directory "
                      "(e.g. nlp/assets/ernie-tiny-zh), or null for the dictionary rule")
    if recipe.distill is not None and recipe.train.data.batching == "packed":
        errors.append("distill: train.data.batching=packed mixes examples in a row, so the teacher's cached "
                      "outputs per example do not line up; use dynamic or length_grouped")
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
    local = [(f"data.files.{split}", path) for split, path in data.files.items()]
    local += [(f"data.extra_train[{i}]", path) for i, path in enumerate(data.extra_train)]
    for key, path in local:
        full = Path(base_dir, path) if base_dir else Path(path)
        if not full.expanduser().is_file():
            errors.append(f"{key}: file {str(full)!r} does not exist")
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
