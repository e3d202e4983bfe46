"""The MODEL argument of `nlp predict` / `nlp serve` / `nlp evaluate` / `nlp export`: a directory,
a registered hub name, or the task's shipped default."""

from __future__ import annotations

from pathlib import Path

from nlp._common import ConfigError, did_you_mean


def local_model(model: str) -> str:
    """`model` as given when it is a path that exists, or one that names a missing directory (the
    directory checks then say so); a registered hub name (`nlp hub ls`) becomes its local snapshot,
    resolved through the hub (offline for the package's own models, sha256-verified). A bare word
    that is neither gets the registered names that look like it."""
    if Path(model).expanduser().exists():
        return model
    from nlp.hub.registry import find_card, list_models

    if find_card(model) is None:
        if "/" in model or "\\" in model or model.startswith("."):
            return model
        raise ConfigError(f"{model!r} is neither a directory nor a registered model name."
                          f"{did_you_mean(model, list_models())} Give a run, model or export directory, or a "
                          "name from `nlp hub ls`")
    from nlp.auto import resolve

    return str(resolve(model))


def model_or_default(model: str | None, task: str | None) -> str:
    """`model` as `local_model` reads it, or (no model, `--task` given) the local snapshot of the
    task's default model, resolved through the hub (sha256-verified package data, offline)."""
    return model_and_name(model, task)[0]


def model_and_name(model: str | None, task: str | None) -> tuple[str, str]:
    """(`model_or_default`'s directory, the name to report it by): `model` as given (a hub name
    stays the name, never the path of its snapshot in the cache), or the default model's name."""
    if model is not None:
        return local_model(model), model
    from nlp.auto import default_model, resolve
    from nlp.tasks.registry import default_models

    if not task:
        listed = ", ".join(f"{t} ({m})" for t, m in default_models().items())
        raise ConfigError("no model given: give a run, model or export directory, or --task TASK to use the "
                          f"task's default model (tasks with one: {listed}), e.g. `--task ner`")
    name = default_model(task)
    return str(resolve(name)), name
