"""Run a recipe: tokenizer + model, data -> features, the Trainer, then dev/test scores.

    from nlp.train.finetune import finetune
    from nlp.train.recipe import load_recipe
    result = finetune(load_recipe("recipes/sentiment-reviews.yaml", ["train.epochs=1"]))
    result.dev, result.test      # {"accuracy": ..., ...}

Names become objects through `Loaders`: `nlp.train` may not import the hub, so the CLI passes
hub-aware loaders (nlp.auto), and the default ones read local directories only.

The run directory (train.output_dir) is the engine's (docs/training.md) plus:
  recipe.yaml       the recipe as run (after overrides)
  tokenizer/        the tokenizer the run uses (trained on the fly, or copied)
  model/            the final (best) model + tokenizer files; config.json holds id2label
  labels.txt        the label (tag) names, one a line, in id order
  results.json      dev and test metrics of the final model (model/)
A fresh run writes recipe.yaml and tokenizer/ after the engine has taken the directory (its
first step); a second run of the same command resumes (the engine's `resume: auto`) with the
saved tokenizer, so token ids never change under a resumed model.
"""

from __future__ import annotations

import json
import logging
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import torch
import yaml
from accelerate.utils import set_seed

from nlp._common import ConfigError, DataError, NlpError, atomic_write
from nlp.models import ErnieConfig, PreTrainedEncoder, preset_config, select_layers
from nlp.models.precision import drop_declared_precision
from nlp.tasks.model_dirs import find_model_dir, task_of_model  # re-exported: nlp predict / evaluate
from nlp.tasks.registry import get_task
from nlp.tasks.spec import TaskSpec
from nlp.tokenizer import PackingCollator, Tokenizer, load_tokenizer
from nlp.train.evaluation import EvalPrediction, predict_loop
from nlp.train.recipe import Recipe, config_contradictions, recipe_to_dict
from nlp.train.run_dir import write_run_files
from nlp.train.trainer import Trainer

__all__ = ["Loaders", "local_loaders", "finetune", "FinetuneResult", "TaskData", "load_task_data",
           "evaluate_model", "find_model_dir", "task_of_model"]

logger = logging.getLogger(__name__)


# --------------------------------------------------------------------------- loaders


def _local_dir(name: str) -> Path:
    path = Path(name).expanduser()
    if not path.is_dir():
        raise ConfigError(f"{name!r} is not a local directory; hub names need the `nlp` CLI or "
                          "nlp.train.finetune(..., loaders=...) with hub-aware loaders")
    return path


@dataclass
class Loaders:
    """How names become objects. `model(head_class, name, overrides)` loads weights,
    `config(name, overrides)` reads an architecture, `tokenizer(name)` a tokenizer, `directory(name)`
    gives a local model directory (the distillation teacher's), and `fetch` (the hub's
    `fetch_file`) downloads a public dataset's files; None: local files only."""

    model: Callable[[type, str, dict], PreTrainedEncoder]
    config: Callable[[str, dict], ErnieConfig]
    tokenizer: Callable[[str], Tokenizer]
    fetch: Callable[..., Path] | None = None
    directory: Callable[[str], Path] = _local_dir


def local_loaders() -> Loaders:
    """Loaders for local directories only (library use without the hub)."""
    return Loaders(
        model=lambda head, name, overrides: head.from_pretrained(_local_dir(name), **overrides),
        config=lambda name, overrides: ErnieConfig.from_pretrained(_local_dir(name), **overrides),
        tokenizer=lambda name: load_tokenizer(_local_dir(name)),
    )


# --------------------------------------------------------------------------- data


@dataclass
class TaskData:
    """The raw splits of a recipe and the label names found in (and checked against) them."""

    splits: dict[str, Any]  # "train" / "dev" / "test" -> datasets.Dataset (missing when unused)
    label_names: list[str] | None  # None for QA and regression
    sources: dict[str, str] = field(default_factory=dict)  # role -> the file or dataset it came from
    extra_train_rows: int = 0  # the last rows of the train split: records of data.extra_train

    @property
    def own_train(self) -> Any:
        """The train split without data.extra_train's records (what the task's files saved with
        the model are built from: a teacher's labels are not the data's own vocabulary)."""
        train = self.splits["train"]
        return train.select(range(len(train) - self.extra_train_rows)) if self.extra_train_rows else train


def _read_splits(spec: TaskSpec, data: Any, wanted: dict[str, str],
                 fetch: Callable[..., Path] | None = None) -> tuple[dict[str, Any], dict[str, str]]:
    """role -> Dataset of the splits `wanted` (role -> split name), and where each came from."""
    from nlp.tasks.datasets import BUILTIN, PUBLIC, load, read_public_file

    splits: dict[str, Any] = {}
    sources: dict[str, str] = {}
    builtin = load(data.dataset) if data.dataset is not None and data.dataset.lower() in BUILTIN else None
    for role, split in wanted.items():
        if data.dataset is None:
            sources[role] = data.files[split]
            splits[role] = spec.read(data.files[split], data, need_labels=role == "train")
        elif builtin is not None:
            dsd = builtin
            if split not in dsd:
                raise ConfigError(f"data.{role}_split: {data.dataset!r} has no split {split!r}; "
                                  f"valid: {', '.join(dsd)}")
            sources[role], splits[role] = f"dataset {data.dataset!r}", dsd[split]
        elif split in data.files:
            sources[role] = data.files[split]
            splits[role] = read_public_file(PUBLIC[data.dataset.lower()], data.files[split], split)
        else:  # the published file, downloaded once (needs the network)
            sources[role], splits[role] = f"dataset {data.dataset!r}", load(data.dataset, split, fetch=fetch)
    return splits, sources


def _with_extra_train(spec: TaskSpec, data: Any, train: Any, source: str) -> tuple[Any, str]:
    """The train split with the records of `data.extra_train` after it, and where it came from.
    An extra file is read with the train split's label set (its ids by name: a teacher's file may
    use some of the labels only); one with other labels or columns is refused by name."""
    import dataclasses

    import datasets

    parts = [train]
    names = spec.label_names(train) if spec.trains_on(train) else None
    as_train = dataclasses.replace(data, label_names=names) if names is not None and data.label_names is None else data
    for i, path in enumerate(data.extra_train):
        key = f"data.extra_train[{i}] ({path})"
        try:
            extra = spec.read(path, as_train, need_labels=True)
        except DataError as err:
            raise ConfigError(f"{key}: {err}") from None
        if not spec.trains_on(extra):
            raise ConfigError(f"{key}: its records have no labels ({spec.label_column!r} missing); extra "
                              "training files are labelled, e.g. by a teacher: nlp predict TEACHER --input FILE "
                              "--format training")
        other = spec.label_names(extra)
        if names is not None and other is not None and other != names:
            raise ConfigError(f"{key}: its labels {other} differ from the train split's {names}")
        extra = _with_record_ids(extra, train, key)
        if extra.features != train.features:
            try:
                extra = extra.cast(train.features)
            except (ValueError, TypeError) as err:
                raise ConfigError(f"{key}: its columns {dict(extra.features)} do not match the train split's "
                                  f"{dict(train.features)}: {err}") from None
        parts.append(extra)
    joined = datasets.concatenate_datasets(parts)
    logger.info("data: %d training records (%d from %s, %s from data.extra_train)", len(joined), len(train),
                source, " + ".join(str(len(p)) for p in parts[1:]))
    return joined, f"{source} + " + " + ".join(data.extra_train)


def _with_record_ids(extra: Any, train: Any, key: str) -> Any:
    """`extra` with the text columns the train split has and its files lack (a built-in dataset's
    `id`) filled with ids of its own ("data.extra_train[i] (FILE):ROW"), so the two join; any other
    missing column is left for the caller's check to name."""
    import datasets

    missing = [c for c in train.column_names if c not in extra.column_names
               and train.features[c] == datasets.Value("string")]
    if not missing:
        return extra
    for column in missing:
        extra = extra.add_column(column, [f"{key}:{j}" for j in range(len(extra))])
    if not set(train.column_names) <= set(extra.column_names):
        return extra
    return extra.select_columns(train.column_names)  # the split's column order, so the two concatenate


def load_task_data(recipe: Recipe, fetch: Callable[..., Path] | None = None, *, spec: TaskSpec | None = None) -> TaskData:
    """Read the splits the recipe uses; check the label set. Raises ConfigError naming the key
    or file on a missing file, an unreadable record or a label set that does not match.
    `spec`: the recipe's task (looked up when not given), as for the other helpers here."""
    spec, data = spec or get_task(recipe.task.name), recipe.data
    spec.check_requirements("train")
    if data.label_names is not None and not spec.has_label_set:
        raise ConfigError(f"data.label_names: {spec.name} has no label set; remove it")
    wanted = {"train": data.train_split, "dev": data.dev_split, "test": data.test_split}
    try:
        splits, sources = _read_splits(spec, data, {k: v for k, v in wanted.items() if v is not None}, fetch)
    except DataError as err:
        key = "data.label_names" if "label set" in str(err) or "tag set" in str(err) else "data"
        raise ConfigError(f"{key}: {err}") from None
    splits["train"] = spec.training_split(splits["train"], recipe.task)  # e.g. k examples per class
    originals = len(splits["train"])
    if data.extra_train:
        splits["train"], sources["train"] = _with_extra_train(spec, data, splits["train"], sources["train"])
    for role, ds in splits.items():  # an empty dev or test split would fail only when scored
        if len(ds) == 0:
            raise ConfigError(f"data: the {role} split ({wanted[role]!r}) is empty: {sources[role]} "
                              f"holds no records" + ("" if role == "train" else f"; or set data.{role}_split: null"))
    if not spec.trains_on(splits["train"]):
        raise ConfigError(f"data: the train split ({sources['train']}) has no labels (columns: "
                          f"{', '.join(splits['train'].column_names)}; {spec.label_column!r} missing)")
    names = spec.label_names(splits["train"])
    for role, ds in splits.items():
        other = spec.label_names(ds)
        if names is not None and other is not None and other != names:
            raise ConfigError(f"data: the {role} split's labels {other} differ from the train split's {names}")
    if data.label_names is not None and names is not None and list(data.label_names) != names:
        missing = [n for n in names if n not in data.label_names]
        extra = [n for n in data.label_names if n not in names]
        detail = (f"the data has {missing} not in data.label_names" if missing else
                  f"data.label_names has {extra} not in the data" if extra else "the order differs")
        raise ConfigError(f"data.label_names {list(data.label_names)} does not match the labels of "
                          f"the data {names}: {detail}. Fix data.label_names (in id order) or the data.")
    if data.max_train_samples is not None:
        splits["train"] = splits["train"].select(range(min(data.max_train_samples, len(splits["train"]))))
    if data.max_eval_samples is not None:
        for role in ("dev", "test"):
            if role in splits:
                splits[role] = splits[role].select(range(min(data.max_eval_samples, len(splits[role]))))
    return TaskData(splits, names, sources, extra_train_rows=max(0, len(splits["train"]) - originals))


# --------------------------------------------------------------------------- features


def featurize(recipe: Recipe, ds: Any, tokenizer: Tokenizer, label_names: list[str] | None, *,
              spec: TaskSpec | None = None) -> list[dict]:
    """Feature dicts (python lists) of one split, through the task's preprocessing."""
    spec = spec or get_task(recipe.task.name)
    try:
        columns = spec.featurize(ds[:], tokenizer, recipe.data, label_names, settings=recipe.task)
    except DataError as err:
        raise ConfigError(f"data: {err}") from None
    n = len(next(iter(columns.values()), []))  # features per column, whatever the task names them
    return [{k: v[i] for k, v in columns.items()} for i in range(n)]


# --------------------------------------------------------------------------- metrics


class TaskMetrics:
    """The Trainer's compute_metrics + preprocess_logits for one task, from its spec. Metrics
    that map features back to examples (QA) need the set being scored: `use(examples,
    features)` switches it (dev during training, then test)."""

    def __init__(self, task: str | TaskSpec, label_names: list[str] | None, model: PreTrainedEncoder,
                 recipe: Recipe):
        self.spec = get_task(task) if isinstance(task, str) else task
        self.label_names, self.model, self.data, self.settings = label_names, model, recipe.data, recipe.task
        self.label_keys = self.spec.label_keys
        self.examples: Any = None
        self.features: list[dict] | None = None

    def use(self, examples: Any, features: list[dict]) -> "TaskMetrics":
        self.examples, self.features = examples, features
        return self

    def preprocess_logits(self, outputs: Any, batch: Mapping[str, torch.Tensor]) -> Any:
        return self.spec.keep_logits(_unwrap(self.model), outputs, batch)

    def __call__(self, pred: EvalPrediction) -> dict[str, float]:
        return self.spec.score(pred.predictions, pred.label_ids, label_names=self.label_names,
                               examples=self.examples, features=self.features, data=self.data,
                               settings=self.settings)


def _unwrap(model: Any) -> Any:
    return getattr(model, "module", model)


def evaluate_model(model: PreTrainedEncoder, metrics: TaskMetrics, features: list[dict],
                   collate_fn: Callable, *, batch_size: int = 64) -> dict[str, float]:
    """Loss and task metrics of `model` on labelled `features`, in this process alone (no
    Trainer: `nlp evaluate`); the same loop as the Trainer's evaluation."""
    prediction, loss = predict_loop(model, features, collate_fn, batch_size=batch_size,
                                    preprocess=metrics.preprocess_logits, label_keys=metrics.label_keys)
    out = {} if loss is None else {"loss": loss}
    out.update(metrics(prediction))
    return out


# --------------------------------------------------------------------------- model and tokenizer


def _build_tokenizer(recipe: Recipe, train_ds: Any, loaders: Loaders, run_dir: Path, *,
                     spec: TaskSpec | None = None) -> Tokenizer:
    saved = run_dir / "tokenizer"
    if (saved / "tokenizer_config.json").is_file() or (saved / "vocab.txt").is_file():
        return load_tokenizer(saved)  # a resumed run keeps its token ids
    tok_section = recipe.tokenizer
    if tok_section.train is None:
        return loaders.tokenizer(tok_section.name or recipe.model.name)  # type: ignore[arg-type]
    from nlp.tokenizer import train_hybrid_tokenizer

    t = tok_section.train

    def train() -> Tokenizer:
        with tempfile.TemporaryDirectory() as tmp:
            corpus = Path(tmp, "corpus.txt")
            corpus.write_text("\n".join((spec or get_task(recipe.task.name)).training_texts(train_ds)), encoding="utf-8")
            try:
                return train_hybrid_tokenizer(corpus, t.vocab_size, word_fraction=t.word_fraction,
                                              min_frequency=t.min_frequency,
                                              model_max_length=max(512, recipe.data.max_length))
            except NlpError as err:
                raise ConfigError(f"tokenizer.train: {err}") from None

    state = _process_state(recipe)
    if state.num_processes == 1:
        return train()
    # Data-parallel: BPE merge ties may be ordered differently in two trainings, so the main
    # process trains once and every process loads the same files (a shared file system).
    staging = run_dir.parent / f".{run_dir.name}.tokenizer-staging"
    if state.is_main_process:
        shutil.rmtree(staging, ignore_errors=True)
        train().save_pretrained(staging)
    state.wait_for_everyone()
    tok = load_tokenizer(staging)
    state.wait_for_everyone()
    if state.is_main_process:
        shutil.rmtree(staging, ignore_errors=True)
    return tok


def _process_state(recipe: Recipe) -> Any:
    """accelerate's process group, set up as the Trainer's Accelerator will want it: created
    before the Trainer with other settings, a launched CPU run would stay one process."""
    from accelerate import PartialState

    return PartialState(cpu=not (torch.cuda.is_available() and not recipe.train.cpu))


def build_model(recipe: Recipe, tokenizer: Tokenizer, label_names: list[str] | None,
                loaders: Loaders, train: Any = None, *, spec: TaskSpec | None = None) -> PreTrainedEncoder:
    """The task head model: pretrained weights (`model.name`) or random ones (`model.init`).
    `train` (the training split) lets the task set what the data decides (problem_type)."""
    spec = spec or get_task(recipe.task.name)
    m = recipe.model
    contradictions = config_contradictions(spec, recipe, label_names, train)
    if contradictions:
        raise ConfigError("; ".join(contradictions))
    overrides = {**spec.head_config(label_names, train, recipe.task), **m.config}
    try:
        if m.init == "pretrained":
            model = loaders.model(spec.head, m.name, overrides)  # type: ignore[arg-type]
            spec.check_head(model.config, label_names)
            if m.layer_map is not None:  # a smaller (or deeper) model of name's own layers
                model = select_layers(model, m.layer_map)
        else:
            if recipe.tokenizer.train is not None:
                overrides.setdefault("vocab_size", tokenizer.vocab_size)
            overrides.setdefault("pad_token_id", tokenizer.pad_token_id)
            config = (preset_config(m.preset, **overrides) if m.preset is not None
                      else loaders.config(m.name, overrides))  # type: ignore[arg-type]
            model = spec.head(config)
    except (TypeError, ValueError) as err:
        if isinstance(err, NlpError):
            raise ConfigError(f"model: {err}") from None
        raise ConfigError(f"model.config: {err}") from None
    drop_declared_precision(model, "fine-tuned")
    if tokenizer.num_token_types is not None:  # more token type ids than a pair's (a gazetteer's)
        model.grow_token_types(tokenizer.num_token_types)
    if tokenizer.vocab_size > model.config.vocab_size:
        raise ConfigError(f"the tokenizer has {tokenizer.vocab_size} tokens but the model's "
                          f"vocab_size is {model.config.vocab_size}; set model.config.vocab_size or "
                          "use the model's own tokenizer")
    if recipe.data.max_length > model.config.max_sequence_length:
        raise ConfigError(f"data.max_length={recipe.data.max_length} exceeds the model's "
                          f"{model.config.max_sequence_length} positions "
                          f"(max_position_embeddings={model.config.max_position_embeddings}); "
                          f"set data.max_length<={model.config.max_sequence_length}")
    return model


# --------------------------------------------------------------------------- the run


@dataclass
class FinetuneResult:
    run_dir: Path
    model_dir: Path
    status: str
    dev: dict[str, float] | None
    test: dict[str, float] | None
    summary: dict[str, Any] = field(default_factory=dict)


class _SaveRunFiles:
    """Writes recipe.yaml and tokenizer/ once the engine has taken the run directory."""

    def __init__(self, recipe: Recipe, tokenizer: Tokenizer, run_dir: Path, is_main: bool):
        self.recipe, self.tokenizer, self.run_dir, self.is_main = recipe, tokenizer, run_dir, is_main
        self.done = (run_dir / "tokenizer").is_dir()

    def on_step_end(self, trainer: Any, state: Any) -> None:
        if self.done or not self.is_main:
            return
        self.done = True
        text = yaml.safe_dump(recipe_to_dict(self.recipe), allow_unicode=True, sort_keys=False)
        write_run_files(self.run_dir, {"recipe.yaml": text, "tokenizer": self.tokenizer})


def _check_run_dir(recipe: Recipe, run_dir: Path) -> None:
    """Refuse a directory the engine would resume but that holds another task's run."""
    saved = run_dir / "recipe.yaml"
    if saved.is_file():
        old = yaml.safe_load(saved.read_text(encoding="utf-8")) or {}
        if old.get("task", {}).get("name") not in (None, recipe.task.name):
            raise ConfigError(f"train.output_dir {run_dir} holds a {old['task']['name']} run; this "
                              f"recipe is {recipe.task.name}. Pick another train.output_dir.")


class _FinalScores:
    """Scores dev and test with the final model (model/), through the Trainer's own evaluation,
    at the end of training (while every process still takes part)."""

    def __init__(self, metrics: TaskMetrics, splits: Mapping[str, Any], features: Mapping[str, list[dict]]):
        self.metrics, self.splits, self.features = metrics, splits, features
        self.scores: dict[str, dict[str, float] | None] = {"dev": None, "test": None}

    def on_train_end(self, trainer: Trainer, state: Any) -> None:
        for role in self.scores:
            if role in self.features:
                self.metrics.use(self.splits[role], self.features[role])
                self.scores[role] = trainer.evaluate(self.features[role])
        if "dev" in self.features:  # later evaluations of eval_dataset score dev again
            self.metrics.use(self.splits["dev"], self.features["dev"])


def finetune(recipe: Recipe, loaders: Loaders | None = None, *, callbacks: Sequence[Any] = ()) -> FinetuneResult:
    """Run `recipe` end to end; returns the dev/test metrics of the final model (model/)."""
    loaders = loaders or local_loaders()
    spec, settings = get_task(recipe.task.name), recipe.train
    run_dir = Path(settings.output_dir)
    _check_run_dir(recipe, run_dir)
    data = load_task_data(recipe, loaders.fetch, spec=spec)  # bad files / labels fail here, before any model is built
    for role in ("dev", "test"):
        if role in data.splits and not spec.has_labels(data.splits[role]):
            logger.warning("the %s split has no labels; it is not scored", role)
            del data.splits[role]
    if settings.data.batching == "packed" and not spec.packable:
        raise ConfigError(f"train.data.batching=packed does not apply to {spec.name}; use dynamic "
                          "or length_grouped")
    if "dev" not in data.splits and settings.eval.metric != "loss":
        raise ConfigError(f"train.eval.metric={settings.eval.metric!r} needs a labelled dev split; "
                          "set data.dev_split or train.eval.metric: loss")
    tokenizer = _build_tokenizer(recipe, data.splits["train"], loaders, run_dir, spec=spec)
    train_groups = spec.prepare_tokenizer(tokenizer, data.splits["train"], data.label_names, settings=recipe.task)
    if recipe.data.max_length > tokenizer.model_max_length:
        # Fine-tuned on longer inputs than its tokenizer says (ernie-tiny-zh was pretrained on 128
        # tokens): the run's tokenizer records the length the model now works at, or its
        # pipelines would cut every window at the old length.
        tokenizer.model_max_length = recipe.data.max_length
    # The new head's weights (or the whole model's, model.init=random) come from the seed, so
    # the same recipe gives the same run; a resumed run loads its weights from the checkpoint.
    set_seed(settings.seed)
    model = build_model(recipe, tokenizer, data.label_names, loaders, data.splits["train"], spec=spec)
    features = {role: featurize(recipe, ds, tokenizer, data.label_names, spec=spec) for role, ds in data.splits.items()
                if not (role == "train" and train_groups is not None)}
    if train_groups is not None:  # groups of training rows, each featurized with its own tokenizer
        features["train"] = [f for rows, tok in train_groups
                             for f in featurize(recipe, data.splits["train"].select(rows), tok, data.label_names, spec=spec)]
    pad = tokenizer.pad_token_id
    eval_collate = spec.collator(tokenizer)
    spec.prepare_model(model, features["train"], eval_collate, recipe.task, tokenizer=tokenizer, data=recipe.data,
                       label_names=data.label_names, device=_process_state(recipe).device)
    train_collate: Any = eval_collate
    if settings.data.batching == "packed":
        train_collate = PackingCollator(max_length=settings.data.pack_max_length, pad_token_id=pad)
    trained: Any = model  # what the Trainer steps: the model, or the model with its distillation losses
    if recipe.distill is not None:
        from nlp.train.distill import prepare_distillation

        trained, features["train"], train_collate = prepare_distillation(
            recipe, spec, model, tokenizer, data.label_names, features["train"], train_collate,
            train_examples=data.splits["train"],
            featurize=lambda ds: featurize(recipe, ds, tokenizer, data.label_names, spec=spec),
            device=_process_state(recipe).device, directory=loaders.directory)
    metrics = TaskMetrics(spec, data.label_names, model, recipe)
    if "dev" in features:
        metrics.use(data.splits["dev"], features["dev"])
    final = _FinalScores(metrics, data.splits, features)
    trainer = Trainer(
        trained, settings, train_dataset=features["train"], collate_fn=train_collate,
        eval_dataset=features.get("dev"), eval_collate_fn=eval_collate, compute_metrics=metrics,
        preprocess_logits=metrics.preprocess_logits, label_keys=metrics.label_keys,
        lengths=[spec.feature_length(f) for f in features["train"]], run_files=("recipe.yaml", "tokenizer"),
        saved_with_model=(tokenizer, *spec.saved_with_model(data.own_train, recipe.task)),
        loss_units=spec.loss_units(model),
        callbacks=[_SaveRunFiles(recipe, tokenizer, run_dir, _process_state(recipe).is_main_process),
                   final, *callbacks],
    )
    result = trainer.train()
    scores = final.scores
    if trainer.accelerator.is_main_process:
        if data.label_names is not None:
            with atomic_write(run_dir / "labels.txt", "w", encoding="utf-8") as f:
                f.write("\n".join(data.label_names) + "\n")
        with atomic_write(run_dir / "results.json", "w", encoding="utf-8") as f:
            json.dump({"task": spec.name, "status": result.status, "dev": scores["dev"], "test": scores["test"],
                       "summary": result.summary}, f, indent=2, ensure_ascii=False)
    return FinetuneResult(run_dir, result.model_dir, result.status, scores["dev"], scores["test"], result.summary)
