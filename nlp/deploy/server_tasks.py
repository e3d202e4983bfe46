"""What each route of the server takes and returns: the task spec's serving adapters.

The adapters live with their tasks (`nlp/tasks/serving.py` for the base class,
`nlp/tasks/<task>/serving.py` for each task's); the server asks the spec for its routes
(`TaskSpec.serving_routes()`: `{"/predict": spec.serving}`, plus whatever a task adds, such as
TEI's `/embed`), so it never branches on a task's name.
"""

from __future__ import annotations

import functools

from nlp.tasks.registry import get_task
from nlp.tasks.serving import Limits, Parsed, RequestError, ServingAdapter, split_outputs
from nlp.tasks.serving_tokens import token_routes

__all__ = ["Limits", "Parsed", "RequestError", "ServingAdapter", "TaskAdapter", "adapter_for", "routes_for",
           "split_outputs"]

TaskAdapter = ServingAdapter  # the name before the adapters moved into the task packages


def routes_for(task: str) -> dict[str, ServingAdapter]:
    """{path: adapter} of the routes `task`'s model answers (POST), `/predict` first, then the
    task's own, then the tokenizer's (`/tokenize`, `/decode`: every task has a tokenizer)."""
    spec = get_task(task)
    routes = dict(spec.serving_routes())
    if "/predict" not in routes:
        routes = {"/predict": spec.serving, **routes}
    return {**routes, **{p: a for p, a in _token_routes(spec.name).items() if p not in routes}}


@functools.lru_cache(maxsize=None)
def _token_routes(task: str) -> dict[str, ServingAdapter]:
    return token_routes(task)


def adapter_for(task: str) -> ServingAdapter:
    """The adapter of `task`'s POST /predict."""
    return routes_for(task)["/predict"]
