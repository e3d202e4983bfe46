"""Finding a saved head model and its task: in a run directory (RUN/model) or a model directory.

Shared by everything that takes "a run or a model directory" (`nlp predict`, `nlp evaluate`,
`nlp export`, `nlp serve`); the trainer re-exports these names (nlp.train.finetune).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from nlp._common import ConfigError
from nlp.tasks.registry import task_of_architecture

__all__ = ["find_model_dir", "task_of_model", "run_recipe"]

def find_model_dir(path: str | Path) -> Path:
    """A run directory's exported model (RUN/model), or a model directory itself."""
    path = Path(path).expanduser()
    if (path / "model" / "config.json").is_file():
        return path / "model"
    if (path / "config.json").is_file():
        return path
    raise ConfigError(f"{str(path)!r} is neither a run directory (with model/config.json) nor a model "
                      "directory (with config.json); give the train.output_dir of a finished run")


def run_recipe(model_dir: Path) -> dict[str, Any]:
    """The recipe a run's model was trained with (RUN/recipe.yaml beside RUN/model), or {}."""
    path = Path(model_dir).parent / "recipe.yaml"
    return (yaml.safe_load(path.read_text(encoding="utf-8")) or {}) if path.is_file() else {}


def task_of_model(model_dir: Path) -> str:
    """The task of a saved head model, from its config's `architectures` (transformers' field)."""
    cfg = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
    for arch in cfg.get("architectures") or []:
        spec = task_of_architecture(arch)
        if spec is not None:
            return spec.name
    recipe = run_recipe(model_dir)
    if recipe:
        return recipe["task"]["name"]
    raise ConfigError(f"cannot tell the task of {model_dir}: config.json names no task head "
                      f"(architectures: {cfg.get('architectures')}); pass --task")
