"""The MODEL argument of `nlp predict` / `nlp serve`: a directory, or the task's shipped default."""

from __future__ import annotations

from nlp._common import ConfigError


def model_or_default(model: str | None, task: str | None) -> str:
    """`model` as given, or (no model, `--task` given) the local snapshot of the task's default
    model, resolved through the hub (sha256-verified package data, offline)."""
    if model is not None:
        return model
    from nlp.auto import default_model, resolve
    from nlp.tasks.registry import default_models

    if not task:
        listed = ", ".join(f"{t} ({m})" for t, m in default_models().items())
        raise ConfigError("no model given: give a run, model or export directory, or --task TASK to use the "
                          f"task's default model (tasks with one: {listed}), e.g. `--task ner`")
    return str(resolve(default_model(task)))
