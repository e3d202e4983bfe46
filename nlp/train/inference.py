"""Scoring and predicting with a finished run or a model directory (`nlp evaluate`, `nlp predict`).

A run directory's model is RUN/model (model + tokenizer + id2label); its recipe.yaml supplies
the max_length the model was trained with. The task comes from config.json's `architectures`.
An export directory (`nlp export`) is scored and run through a backend the caller hands in
(nlp.deploy.OnnxBackend, built by the CLI: the trainer never imports nlp.deploy); its own
recipe.yaml, copied from the run, supplies the same settings.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from nlp._common import ConfigError
from nlp.tasks.backend import Backend, BackendModule
from nlp.tasks.predict_file import predict_rows, read_inputs
from nlp.tasks.registry import get_task
from nlp.tokenizer import DataCollatorWithPadding, load_tokenizer
from nlp.train.finetune import TaskMetrics, evaluate_model, featurize, find_model_dir, load_task_data, task_of_model
from nlp.train.recipe import DataSection, Recipe, TaskSection, check_recipe

__all__ = ["evaluate_dir", "predict_file"]


def _run_recipe(model_dir: Path) -> dict[str, Any]:
    """The recipe of the run a model came from: RUN/recipe.yaml beside RUN/model, or the copy
    inside an export directory."""
    for path in (model_dir / "recipe.yaml", model_dir.parent / "recipe.yaml"):
        if path.is_file():
            return yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    return {}


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


def evaluate_dir(model: str | Path, data: str, *, split: str = "test", task: str | None = None,
                 max_length: int | None = None, doc_stride: int | None = None,
                 max_answer_length: int | None = None, batch_size: int | None = None,
                 max_samples: int | None = None, backend: Backend | None = None) -> dict[str, Any]:
    """Metrics of a run's (or model directory's) model on a named dataset split or a file; `data`
    may also be a split name ("test", "dev"), meaning that split of the run's own data.
    With `backend` (an export directory's onnxruntime backend), `model` is that directory and
    the backend computes the outputs; there is no loss then (the metrics only).

    Settings left out (`max_length`, `doc_stride`, `max_answer_length`, `batch_size`) default to
    the run's own (so that a run's dev/test scores come out exactly as in its results.json), else
    to the library defaults."""
    model_dir = find_model_dir(model)
    spec = get_task(task or getattr(backend, "task", None) or task_of_model(model_dir))
    run_recipe = _run_recipe(model_dir)
    trained = run_recipe.get("data", {})
    train_data = (run_recipe.get("train") or {}).get("data") or {}
    batch_size = batch_size or train_data.get("eval_batch_size") or 2 * (train_data.get("batch_size") or 32)
    max_length = max_length or trained.get("max_length") or spec.default_max_length
    doc_stride = doc_stride or trained.get("doc_stride") or 128
    max_answer_length = max_answer_length or trained.get("max_answer_length") or DataSection.max_answer_length
    net = spec.head.from_pretrained(model_dir).eval() if backend is None else BackendModule(backend)
    cfg = net.config
    labels = ([cfg.id2label[i] for i in sorted(cfg.id2label)]
              if spec.has_label_set and cfg.id2label and cfg.num_labels > 1 else None)
    data, split = _run_data(data, split, trained, model_dir)
    is_file = Path(data).expanduser().is_file()
    section = DataSection(dataset=None if is_file else data, files={split: data} if is_file else {},
                          label_names=labels, train_split=split, dev_split=None, test_split=None,
                          max_length=max_length, doc_stride=min(doc_stride, max_length - 1),
                          max_answer_length=max_answer_length,
                          long_sentences=trained.get("long_sentences") or DataSection.long_sentences,
                          max_train_samples=max_samples, reader=dict(trained.get("reader") or {}))
    recipe = Recipe(task=TaskSection(spec.name), data=section)
    errors = [e for e in check_recipe(recipe) if not e.startswith(("model", "tokenizer"))]
    if errors:
        raise ConfigError("--data: " + "; ".join(errors))
    task_data = load_task_data(recipe)
    ds = task_data.splits["train"]
    tok = load_tokenizer(model_dir)
    feats = featurize(recipe, ds, tok, labels)
    metrics = TaskMetrics(spec, labels, net, recipe).use(ds, feats)
    scores = evaluate_model(net, metrics, feats, DataCollatorWithPadding(pad_token_id=tok.pad_token_id),
                            batch_size=batch_size)
    return {"model": str(model_dir), "data": data, "split": split, "examples": len(ds), **scores}


def predict_file(model: str | Path, input_path: str | Path, *, task: str | None = None,
                 batch_size: int = 32, top_k: int = 1, encoding: str = "utf-8",
                 backend: Backend | None = None) -> list[dict[str, Any]]:
    """One result per input line (blank lines included) through the task's pipeline: the
    PyTorch model of a run or model directory, or `backend` (an export directory's) with the
    tokenizer of `model`. See nlp/tasks/predict_file.py for the file formats."""
    model_dir = find_model_dir(model)
    spec = get_task(task or getattr(backend, "task", None) or task_of_model(model_dir))
    rows = read_inputs(input_path, spec, encoding=encoding)
    max_length = _run_recipe(model_dir).get("data", {}).get("max_length")
    if backend is None:
        pipe = spec.pipeline(model_dir, batch_size=batch_size, max_length=max_length)
    else:
        pipe = spec.pipeline(backend, model_dir, batch_size=batch_size, max_length=max_length)
    return predict_rows(pipe, rows, spec, top_k=top_k)
