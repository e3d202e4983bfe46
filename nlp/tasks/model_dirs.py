"""Which model, which task and which recipe a directory holds: the one home for that question.

Used by everything that takes "a run, a model or an export directory" (`nlp export`,
`nlp evaluate`, `nlp predict`, `nlp serve`, `nlp hub ship`)::

    where = locate_model("runs/ner")         # RUN/model, or a model dir, or an export dir
    where.model_dir, where.kind              # Path(".../runs/ner/model"), "run"
    where.spec, where.recipe                 # the task's spec; the run's recipe (a dict, or {})

- a run directory holds RUN/model/config.json (a finished run) and RUN/recipe.yaml;
- a model directory holds config.json (and weights, tokenizer files);
- an export directory (`nlp export`) holds manifest.json, config.json and the run's recipe.yaml.
The task is `task` when given (aliases allowed), else the export manifest's, else the one whose
head the config's `architectures` names (transformers' field), else the run recipe's task.name.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from nlp._common import ConfigError, DataError
from nlp.tasks.model_io import EXPORT_MANIFEST
from nlp.tasks.registry import get_task, task_of_architecture
from nlp.tasks.spec import TaskSpec

__all__ = ["ModelLocation", "locate_model", "find_model_dir", "task_of_model", "check_trained_head", "load_trained_head",
           "run_recipe", "trained_max_length", "EXPORT_MANIFEST"]



@dataclass
class ModelLocation:
    """What a run, model or export directory holds."""

    model_dir: Path  # the directory with config.json (RUN/model for a run)
    kind: str  # "run", "model" or "export"
    spec: TaskSpec  # the task
    recipe: dict[str, Any] = field(default_factory=dict)  # the run's recipe as written, or {}


def find_model_dir(path: str | Path) -> Path:
    """A run directory's exported model (RUN/model), or a model (or export) directory itself."""
    path = Path(path).expanduser()
    if (path / "model" / "config.json").is_file():
        return path / "model"
    if (path / "config.json").is_file():
        return path
    if not path.exists():
        raise ConfigError(f"{str(path)!r} does not exist; give a run directory (train.output_dir) or a model directory")
    raise ConfigError(f"{str(path)!r} holds no model: neither a run directory (with model/config.json; a run "
                      "that has not finished has none yet) nor a model directory (with config.json); give the "
                      "train.output_dir of a finished run")


def run_recipe(model_dir: Path) -> dict[str, Any]:
    """The recipe a model was trained with: the copy inside an export directory, else
    RUN/recipe.yaml beside RUN/model; {} when there is none."""
    model_dir = Path(model_dir)
    for path in (model_dir / "recipe.yaml", model_dir.parent / "recipe.yaml"):
        if path.is_file():
            return yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    return {}


def trained_max_length(model_dir: Path) -> int | None:
    """The max_length a model was trained with (its run's recipe, `data.max_length`), which every
    way of running it (nlp.pipeline, nlp predict, nlp serve, on PyTorch or an export) windows
    texts by; None when no recipe says (the pipeline's default then)."""
    value = (run_recipe(model_dir).get("data") or {}).get("max_length")
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _manifest_task(model_dir: Path) -> str | None:
    path = model_dir / EXPORT_MANIFEST
    if not path.is_file():
        return None
    try:
        task = json.loads(path.read_text(encoding="utf-8")).get("task")
    except (ValueError, AttributeError) as err:
        raise DataError(f"{path} is not a valid export manifest ({err}); export the model again with `nlp export`") from None
    return task if isinstance(task, str) else None


def task_of_model(model_dir: Path, task: str | None = None) -> str:
    """The canonical task name of a saved head model (see the module docstring for the order)."""
    if task is not None:
        return get_task(task).name
    model_dir = Path(model_dir)
    exported = _manifest_task(model_dir)
    if exported is not None:
        return get_task(exported).name
    cfg = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
    for arch in cfg.get("architectures") or []:
        spec = task_of_architecture(str(arch))
        if spec is not None:
            return spec.name
    recipe = run_recipe(model_dir)
    if (recipe.get("task") or {}).get("name"):
        return get_task(recipe["task"]["name"]).name
    raise ConfigError(f"cannot tell the task of {model_dir}: config.json's architectures {cfg.get('architectures')} "
                      "name no task head and no run recipe names the task; pass --task")


def check_trained_head(model_dir: Path, task: str) -> None:
    """ConfigError when config.json's `architectures` name another task's trained head: `task`'s
    head would be new on that model, so it would answer at random (a sentiment pipeline on a NER
    model answers with its tag names). A config that names no task's head (a pretrained base
    model) passes: its loading says which weights are new."""
    spec = get_task(task)
    try:
        cfg = json.loads((Path(model_dir) / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return  # the model's loading names what is wrong with the directory
    archs = cfg.get("architectures") if isinstance(cfg, dict) else None
    archs = [a for a in archs if isinstance(a, str)] if isinstance(archs, list) else []
    trained = [found for found in map(task_of_architecture, archs) if found is not None]
    if not trained or any(a.endswith(spec.architecture_suffix) for a in archs):
        return
    raise ConfigError(f"{task!r}: {model_dir} holds a {trained[0].name} model (config.json's architectures: "
                      f"{', '.join(archs)}); its {spec.name} head was never trained, so it would answer at random. "
                      f"Use a {spec.name} model, or run this one as {trained[0].name}")


def load_trained_head(model_dir: Path, task: str, head: type | None = None) -> Any:
    """`task`'s head (`head`, default the spec's) loaded from `model_dir` for inference, or
    ConfigError where its answers would be random: the model was trained for another task
    (`check_trained_head`), or the checkpoint lacks the head's weights (a pretrained base model).
    A head with no weights of its own (feature extraction's pooling) runs on any encoder: the
    vectors of a fine-tuned classifier's encoder are its encoder's, not random."""
    spec = get_task(task)
    name = spec.name
    model = (head or spec.head).from_pretrained(model_dir)
    if any(not n.startswith("backbone.") for n, _ in model.named_parameters()):
        check_trained_head(model_dir, task)
    if model.new_head_weights:
        raise ConfigError(f"{str(model_dir)!r} has no {name} head: its weights ({', '.join(model.new_head_weights)}) "
                          f"are not in the checkpoint, a pretrained model not fine-tuned for {name}, so its answers "
                          f"would be random. Fine-tune it first (nlp finetune; `nlp recipes ls` lists recipes), or use "
                          f"a {name} model")
    return model


def locate_model(path: str | Path, task: str | None = None) -> ModelLocation:
    """The model directory, its kind, its task and its run's recipe (see the module docstring)."""
    model_dir = find_model_dir(path)
    if (model_dir / EXPORT_MANIFEST).is_file():
        kind = "export"
    else:
        kind = "run" if model_dir != Path(path).expanduser() else "model"
    return ModelLocation(model_dir, kind, get_task(task_of_model(model_dir, task)), run_recipe(model_dir))
