"""Scoring a finished run or a model directory on a data split (`nlp evaluate`, and the
scoring splits of calibration and pruning).

A run directory's model is RUN/model (model + tokenizer + id2label); its recipe.yaml supplies
the max_length the model was trained with. The task comes from config.json's `architectures`.
An export directory (`nlp export`) is scored and run through a backend the caller hands in
(nlp.deploy.OnnxBackend, built by the CLI: the trainer never imports nlp.deploy); its own
recipe.yaml, copied from the run, supplies the same settings. Which model, task and recipe a
directory holds is `nlp.tasks.model_dirs.locate_model`'s answer, as for export and serve.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nlp._common import ConfigError, DataError
from nlp.models import prepare_for_inference
from nlp.tasks.backend import Backend, BackendModule
from nlp.tasks.model_dirs import load_trained_head, locate_model
from nlp.tasks.registry import get_task
from nlp.tasks.spec import TaskSettings, TaskSpec
from nlp.train.finetune import TaskMetrics, evaluate_model, featurize, load_task_data
from nlp.train.recipe import DataSection, Recipe, build_task_settings, check_recipe, migrate_recipe
from nlp.train.schema import format_problems

__all__ = ["evaluate_dir", "scoring_split", "ScoringSplit"]


_SPLIT_NAMES = ("train", "dev", "validation", "test")


def _run_data(data: str, split: str, trained: dict[str, Any], model_dir: Path) -> tuple[str, str]:
    """`--data test` (a split name, not a file): that split of the data the run was trained on
    (its recipe's data.dataset, or its data.files entry); anything else as given."""
    if data not in _SPLIT_NAMES or Path(data).expanduser().is_file():
        return data, split
    if trained.get("dataset"):
        return str(trained["dataset"]), data
    files = trained.get("files") or {}
    if data in files:
        return str(files[data]), data
    where = "its recipe.yaml names" if trained else "there is no run recipe (recipe.yaml) beside it to name"
    raise ConfigError(f"--data {data!r} means the {data} split of the run's own data, but for {model_dir} "
                      f"{where} no dataset or {data} file; give --data DATASET --split {data} or --data FILE")


def _as_given(message: str, split: str) -> str:
    """A data error of the recipe the split is scored through, in the flags the user gave: the
    split is that recipe's train split, which the user never named."""
    return (message.replace("data.train_split", "--split").replace("data.max_train_samples", "--max-samples")
            .replace("the train split", f"the {split} split").replace("data: ", "--data: ", 1))


def _other_task_hint(data: str, is_file: bool, spec: TaskSpec) -> str:
    """Where a built-in dataset of another task was given, a sentence saying so (its rows lack
    the labels this task scores against)."""
    if is_file:
        return ""
    from nlp.tasks import datasets

    try:
        task = datasets.dataset_info(data, with_stats=False).get("task")
    except (ConfigError, DataError, KeyError):
        return ""
    if not task or get_task(task).head is spec.head:
        return ""
    return f". {data!r} is a {task} dataset and the model is {spec.name}: give a {spec.name} dataset (nlp data ls) or file"


def _task_settings(spec: TaskSpec, run_recipe: dict[str, Any], overrides: dict[str, Any]) -> TaskSettings:
    """The run's task settings (its recipe's task section; older runs' data.doc_stride & co.
    moved there), with the command line's `overrides` (None values left out) applied."""
    errors: list[str] = []
    migrated = migrate_recipe({"task": run_recipe.get("task") or {}, "data": run_recipe.get("data") or {}}, errors)
    section = {**(migrated.get("task") or {}), "name": spec.name}
    fields = set(spec.settings.__dataclass_fields__)
    for key, value in overrides.items():
        if value is None:
            continue
        if key not in fields:
            raise ConfigError(f"--{key.replace('_', '-')}: {spec.name} has no {key} setting "
                              f"(its task settings: {', '.join(sorted(fields - {'name'})) or 'none'})")
        section[key] = value
    settings = build_task_settings(section, errors)
    if errors:
        raise ConfigError(format_problems(errors, "the task settings"))
    return settings


@dataclass
class ScoringSplit:
    """A labelled split read and featurized for one model, as `nlp evaluate` scores it."""

    model_dir: Path
    spec: TaskSpec
    recipe: Recipe
    labels: list[str] | None
    tokenizer: Any
    examples: Any  # datasets.Dataset
    features: list[dict]
    data: str
    split: str
    batch_size: int
    precision: str  # what the network runs in (nlp.models.precision)

    def featurize(self, examples: Any) -> list[dict]:
        """Features of other examples of this split (a subset), as the split's were made."""
        return featurize(self.recipe, examples, self.tokenizer, self.labels, spec=self.spec)

    def score(self, net: Any, examples: Any = None, features: list[dict] | None = None) -> dict[str, Any]:
        """The loss (when `net` computes one) and task metrics of `net` on the split, or on
        `examples` / `features` of it."""
        examples = self.examples if examples is None else examples
        features = self.features if features is None else features
        metrics = TaskMetrics(self.spec, self.labels, net, self.recipe).use(examples, features)
        return evaluate_model(net, metrics, features, self.spec.collator(self.tokenizer), batch_size=self.batch_size)


def scoring_split(model: str | Path, data: str, *, split: str = "test", task: str | None = None,
                  max_length: int | None = None, batch_size: int | None = None,
                  max_samples: int | None = None, backend: Backend | None = None,
                  task_settings: dict[str, Any] | None = None,
                  options: dict[str, Any] | None = None, precision: str | None = "fp32") -> tuple[ScoringSplit, Any]:
    """The split `evaluate_dir` scores and the network it scores it with (see evaluate_dir).
    `precision` defaults to fp32 for the callers that reuse the network (calibration, pruning):
    they read its fp32 activations and weights, whatever precision the model declares."""
    for name, value in (("batch_size", batch_size), ("max_length", max_length), ("max_samples", max_samples)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise ConfigError(f"{name} (--{name.replace('_', '-')}) must be a whole number >= 1, got {value!r}; "
                              "leave it out for the default")
    where = locate_model(model, task or getattr(backend, "task", None))
    model_dir, spec, run_recipe = where.model_dir, where.spec, where.recipe
    trained = run_recipe.get("data", {})
    train_data = (run_recipe.get("train") or {}).get("data") or {}
    if batch_size is None:
        batch_size = train_data.get("eval_batch_size") or 2 * (train_data.get("batch_size") or 32)
    if max_length is None:
        max_length = trained.get("max_length") or spec.default_max_length
    # the task's call options for evaluation (`nlp evaluate --doc-stride`) are task settings
    checked = spec.check_options(options or {}, "evaluate", max_length=max_length, where="{flag}")
    settings = _task_settings(spec, run_recipe, {**(task_settings or {}), **checked})
    if backend is None:
        net = load_trained_head(model_dir, spec.name).eval()
        ran = prepare_for_inference(net, next(net.parameters()).device, precision)
    elif precision not in (None, "auto"):
        raise ConfigError(f"precision {precision!r}: an export runs in the precision it was made in; leave it out")
    else:
        net, ran = BackendModule(backend), backend.precision
    cfg = net.config
    labels = ([cfg.id2label[i] for i in sorted(cfg.id2label)]
              if spec.has_label_set and cfg.id2label and cfg.num_labels > 1 else None)
    data, split = _run_data(data, split, trained, model_dir)
    is_file = Path(data).expanduser().is_file()
    section = DataSection(dataset=None if is_file else data, files={split: data} if is_file else {},
                          label_names=labels, train_split=split, dev_split=None, test_split=None,
                          max_length=max_length, max_train_samples=max_samples,
                          reader=dict(trained.get("reader") or {}))
    recipe = Recipe(task=settings, data=section)
    errors = [e for e in check_recipe(recipe) if not e.startswith(("model", "tokenizer"))]
    if errors:
        raise ConfigError(_as_given("--data: " + "; ".join(errors), split))
    try:
        task_data = load_task_data(recipe, spec=spec)
    except (ConfigError, DataError) as err:
        raise type(err)(_as_given(str(err), split) + _other_task_hint(data, is_file, spec)) from None
    ds = task_data.splits["train"]
    from nlp.tokenizer import load_tokenizer

    tok = load_tokenizer(model_dir)
    feats = featurize(recipe, ds, tok, labels, spec=spec)
    return ScoringSplit(model_dir=model_dir, spec=spec, recipe=recipe, labels=labels, tokenizer=tok, examples=ds,
                        features=feats, data=data, split=split, batch_size=batch_size, precision=ran), net


def evaluate_dir(model: str | Path, data: str, *, split: str = "test", task: str | None = None,
                 max_length: int | None = None, batch_size: int | None = None,
                 max_samples: int | None = None, backend: Backend | None = None,
                 task_settings: dict[str, Any] | None = None, options: dict[str, Any] | None = None,
                 precision: str | None = None) -> dict[str, Any]:
    """Metrics of a run's (or model directory's) model on a named dataset split or a file; `data`
    may also be a split name ("test", "dev"), meaning that split of the run's own data.
    With `backend` (an export directory's onnxruntime backend), `model` is that directory and
    the backend computes the outputs; there is no loss then (the metrics only).
    `precision`: the model's inference precision, as a pipeline's `precision=` (None: the one its
    config declares, else its own dtype); the result's "inference_precision" says which ran.

    Settings left out (`max_length`, `batch_size`, the task settings: any not in
    `task_settings`, {field of the spec's settings: value}, or `options`, the task's call options
    for "evaluate", checked) default to the run's own (so that a run's
    dev/test scores come out exactly as in its results.json), else to the library defaults."""
    scoring, net = scoring_split(model, data, split=split, task=task, max_length=max_length, batch_size=batch_size,
                                 max_samples=max_samples, backend=backend, task_settings=task_settings,
                                 options=options, precision=precision)
    scores = scoring.score(net)
    return {"model": str(scoring.model_dir), "data": scoring.data, "split": scoring.split,
            "examples": len(scoring.examples), "inference_precision": scoring.precision, **scores}
