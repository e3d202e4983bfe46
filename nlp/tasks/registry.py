"""The task table: task name (or alias) -> its `TaskSpec`, and the `pipeline` factory.

Each task defines its spec in its own package (``nlp/tasks/<task>/spec.py``); this module only
registers them, so the trainer, the CLI, export and `pipeline` look a task up by name instead
of each keeping its own list::

    spec = get_task("ner")            # aliases resolve to "token-classification"
    model = spec.head.from_pretrained(d, num_labels=7)
    feats = ds.map(functools.partial(spec.preprocess, tokenizer=tok), batched=True)

A new task: subclass `nlp.tasks.spec.TaskSpec` in ``nlp/tasks/<task>/spec.py`` and call
`register_task` with an instance (docs/tasks.md).
"""

from __future__ import annotations

from typing import Any

from nlp._common import ConfigError, UnknownNameError, did_you_mean
from nlp.tasks.classification.spec import CLASSIFICATION
from nlp.tasks.ner.spec import TOKEN_CLASSIFICATION
from nlp.tasks.qa.spec import QUESTION_ANSWERING
from nlp.tasks.spec import TaskSpec

__all__ = ["TASKS", "TASK_ALIASES", "TaskSpec", "register_task", "get_task", "list_tasks",
           "task_of_architecture", "default_models", "pipeline"]

TASKS: dict[str, TaskSpec] = {}
# Other names people use for the same tasks (transformers' and PaddleNLP's), from the specs.
TASK_ALIASES: dict[str, str] = {}


def _key(name: str) -> str:
    return str(name).strip().lower().replace("_", "-")


def register_task(spec: TaskSpec) -> TaskSpec:
    """Add a task (its name and aliases) to the table; a name already taken is a ConfigError."""
    for name in (spec.name, *spec.aliases):
        key = _key(name)
        owner = TASKS.get(key) or TASKS.get(TASK_ALIASES.get(key, ""))
        if owner is not None and owner is not spec:
            raise ConfigError(f"task name {name!r} is taken by {owner.name!r}")
    TASKS[spec.name] = spec
    TASK_ALIASES.update({_key(a): spec.name for a in spec.aliases})
    return spec


for _spec in (CLASSIFICATION, TOKEN_CLASSIFICATION, QUESTION_ANSWERING):
    register_task(_spec)


def list_tasks() -> list[str]:
    """The canonical task names."""
    return list(TASKS)


def get_task(name: str) -> TaskSpec:
    """The task called `name` (or an alias); UnknownNameError with a did-you-mean otherwise."""
    key = _key(name)
    key = TASK_ALIASES.get(key, key)
    if key not in TASKS:
        choices = [*TASKS, *TASK_ALIASES]
        raise UnknownNameError(f"Unknown task {name!r}; valid: {', '.join(TASKS)} (aliases: "
                               f"{', '.join(TASK_ALIASES)}).{did_you_mean(key, choices)}")
    return TASKS[key]


def default_models() -> dict[str, str]:
    """{task name: the hub name of its default model}, for the tasks that have one."""
    return {name: spec.default_model for name, spec in TASKS.items() if spec.default_model}


def task_of_architecture(architecture: str) -> TaskSpec | None:
    """The task of a config.json `architectures` entry ("ErnieForTokenClassification"), if any."""
    for spec in TASKS.values():
        if architecture.endswith(spec.architecture_suffix):
            return spec
    return None


def pipeline(task: str, model: Any, tokenizer: Any = None, *, device: Any = None, batch_size: int = 8,
             max_length: int | None = None) -> Any:
    """A pipeline for `task` ("text-classification", "token-classification", "question-answering",
    or an alias such as "ner", "qa", "sentiment-analysis") from a local directory or model object.

    `tokenizer` defaults to the model's directory. Hub names are resolved by `nlp.pipeline`.
    """
    spec = get_task(task)
    return spec.pipeline(model, tokenizer, device=device, batch_size=batch_size, max_length=max_length)
