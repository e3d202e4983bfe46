"""Scoring and predicting with a finished run or a model directory (`nlp evaluate`, `nlp predict`).

A run directory's model is RUN/model (model + tokenizer + id2label); its recipe.yaml supplies
the max_length the model was trained with. The task comes from config.json's `architectures`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from nlp._common import ConfigError, DataError
from nlp.tasks.registry import get_task
from nlp.tasks.spec import TaskSpec
from nlp.tokenizer import DataCollatorWithPadding, load_tokenizer
from nlp.train.finetune import TaskMetrics, evaluate_model, featurize, find_model_dir, load_task_data, task_of_model
from nlp.train.recipe import DataSection, Recipe, TaskSection, check_recipe

__all__ = ["evaluate_dir", "predict_file"]


def _run_recipe(model_dir: Path) -> dict[str, Any]:
    path = model_dir.parent / "recipe.yaml"
    return (yaml.safe_load(path.read_text(encoding="utf-8")) or {}) if path.is_file() else {}


def evaluate_dir(model: str | Path, data: str, *, split: str = "test", task: str | None = None,
                 max_length: int | None = None, doc_stride: int | None = None,
                 max_answer_length: int | None = None, batch_size: int | None = None,
                 max_samples: int | None = None) -> dict[str, Any]:
    """Metrics of a run's (or model directory's) model on a named dataset split or a file.

    Settings left out (`max_length`, `doc_stride`, `max_answer_length`, `batch_size`) default to
    the run's own (so that a run's dev/test scores come out exactly as in its results.json), else
    to the library defaults."""
    model_dir = find_model_dir(model)
    spec = get_task(task or task_of_model(model_dir))
    run_recipe = _run_recipe(model_dir)
    trained = run_recipe.get("data", {})
    train_data = (run_recipe.get("train") or {}).get("data") or {}
    batch_size = batch_size or train_data.get("eval_batch_size") or 2 * (train_data.get("batch_size") or 32)
    max_length = max_length or trained.get("max_length") or spec.default_max_length
    doc_stride = doc_stride or trained.get("doc_stride") or 128
    max_answer_length = max_answer_length or trained.get("max_answer_length") or DataSection.max_answer_length
    net = spec.head.from_pretrained(model_dir).eval()
    cfg = net.config
    labels = ([cfg.id2label[i] for i in sorted(cfg.id2label)]
              if spec.has_label_set and cfg.id2label and cfg.num_labels > 1 else None)
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


def _read_inputs(path: Path, spec: TaskSpec) -> list[dict[str, Any]]:
    if not path.is_file():
        raise ConfigError(f"--input {str(path)!r} does not exist")
    lines = path.read_text(encoding="utf-8-sig").splitlines()
    rows = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        if path.suffix.lower() in (".jsonl", ".json"):
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as err:
                raise DataError(f"{path}:{n}: not a JSON object: {err}") from None
            need = spec.input_fields
            if not isinstance(rec, dict) or any(k not in rec for k in need):
                raise DataError(f"{path}:{n}: expected an object with {', '.join(need)}")
            rows.append(rec)
        elif spec.input_fields != ("text",):
            raise DataError(f"{path}: {spec.name} reads .jsonl lines with {' and '.join(spec.input_fields)}")
        else:
            rows.append({"text": line.strip()})
    return rows


def predict_file(model: str | Path, input_path: str | Path, *, task: str | None = None,
                 batch_size: int = 32, top_k: int = 1) -> list[dict[str, Any]]:
    """One result per input line: labels, entities or answers, through the task's pipeline."""
    model_dir = find_model_dir(model)
    spec = get_task(task or task_of_model(model_dir))
    max_length = _run_recipe(model_dir).get("data", {}).get("max_length")
    pipe = spec.pipeline(model_dir, batch_size=batch_size, max_length=max_length)
    rows = _read_inputs(Path(input_path), spec)
    if not rows:
        return []
    return [{**r, **o} for r, o in zip(rows, spec.predict(pipe, rows, top_k=top_k))]
