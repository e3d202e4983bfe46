"""The task table: task name (or alias) -> its `TaskSpec`, and `build_pipeline`, the task layer's
pipeline factory (`nlp.pipeline`, the public entry point, adds hub names and export directories).

Each task defines its spec in its own package (``nlp/tasks/<task>/spec.py``); this module only
registers them, so the trainer, the CLI, export and `pipeline` look a task up by name instead
of each keeping its own list::

    spec = get_task("ner")            # aliases resolve to "token-classification"
    model = spec.head.from_pretrained(d, num_labels=7)
    feats = ds.map(functools.partial(spec.preprocess, tokenizer=tok), batched=True)

A new task: subclass `nlp.tasks.spec.TaskSpec` in ``nlp/tasks/<task>/spec.py`` and call
`register_task` with an instance (docs/tasks.md).

Tasks from outside the package (plugins) are registered by importing their module, which calls
`register_task`. The registry imports them on its first lookup, from two places:
- the entry point group ``nlp.tasks`` of installed distributions (what a pip-installed plugin
  declares: ``[project.entry-points."nlp.tasks"] mytask = "mypkg.mytask"``); an entry point
  may also name a `TaskSpec` instance or class (``"mypkg.mytask:SPEC"``), which is registered;
- ``$NLP_TASK_PLUGINS``: module names separated by commas (``mypkg.mytask,other.task``), for
  a module that is not installed (a test, a notebook); `nlp` subprocesses inherit it.
"""

from __future__ import annotations

import importlib
import logging
import os
from typing import Any

from nlp._common import ConfigError, UnknownNameError, did_you_mean
from nlp.tasks.spec import DEFAULT_TASK, TaskSpec

__all__ = ["TASKS", "TASK_ALIASES", "TaskSpec", "register_task", "get_task", "list_tasks",
           "task_of_architecture", "default_models", "build_pipeline", "load_plugins", "DEFAULT_TASK",
           "PLUGIN_ENV", "PLUGIN_GROUP"]

logger = logging.getLogger(__name__)

PLUGIN_ENV = "NLP_TASK_PLUGINS"  # module names (comma-separated) that register tasks when imported
PLUGIN_GROUP = "nlp.tasks"  # the entry point group of installed task plugins

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


# The built-in tasks, one line each ("module:SPEC", as a plugin's entry point names it), in the
# order lookups by architecture try them.
BUILTIN_TASKS = (
    "nlp.tasks.classification.spec:CLASSIFICATION",
    "nlp.tasks.ner.spec:TOKEN_CLASSIFICATION",
    "nlp.tasks.qa.spec:QUESTION_ANSWERING",
    "nlp.tasks.embedding.spec:FEATURE_EXTRACTION",
    "nlp.tasks.embedding.spec:SENTENCE_SIMILARITY",
    "nlp.tasks.zero_shot.spec:ZERO_SHOT_CLASSIFICATION",
    "nlp.tasks.ranking.spec:TEXT_RANKING",
    "nlp.tasks.lexical.spec:LEXICAL_ANALYSIS",
    "nlp.tasks.lexical.spec:POS_TAGGING",
    "nlp.tasks.lexical.spec:WORD_SEGMENTATION",
    "nlp.tasks.extraction.spec:INFORMATION_EXTRACTION",
    "nlp.tasks.correction.spec:TEXT_CORRECTION",
)


def _spec_at(target: str) -> TaskSpec:
    """The TaskSpec instance (or class, instantiated) that "module:ATTR" names."""
    module, _, attr = target.partition(":")
    obj = getattr(importlib.import_module(module), attr)
    return obj() if isinstance(obj, type) else obj


for _target in BUILTIN_TASKS:
    register_task(_spec_at(_target))

_plugins_loaded: set[str] = set()  # plugin modules / entry points imported so far
_entry_points: list[Any] | None = None  # the nlp.tasks entry points of the installed distributions


def load_plugins() -> None:
    """Import the task plugins (the ``nlp.tasks`` entry points, then ``$NLP_TASK_PLUGINS``) not
    imported yet; each registers its tasks. A plugin that cannot be imported is a ConfigError
    naming it and where it was named."""
    import importlib.metadata as md

    global _entry_points
    if _entry_points is None:  # installed distributions are read once per process
        _entry_points = list(md.entry_points(group=PLUGIN_GROUP))
    wanted: list[tuple[str, str, Any]] = []
    for ep in _entry_points:
        wanted.append((f"entry point {ep.name} = {ep.value}", ep.value, ep))
    for module in (m.strip() for m in os.environ.get(PLUGIN_ENV, "").split(",")):
        if module:
            wanted.append((f"${PLUGIN_ENV} ({module})", module, None))
    for where, target, ep in wanted:
        if target in _plugins_loaded:
            continue
        _plugins_loaded.add(target)  # first: a plugin that looks tasks up while importing
        try:
            obj = ep.load() if ep is not None else importlib.import_module(target)
        except Exception as err:
            _plugins_loaded.discard(target)
            raise ConfigError(f"the task plugin {where} cannot be imported: {type(err).__name__}: {err}. "
                              f"Install it, put it on PYTHONPATH, or remove it from {where.split(' (')[0]}") from err
        if isinstance(obj, type) and issubclass(obj, TaskSpec):
            obj = obj()
        if isinstance(obj, TaskSpec) and TASKS.get(obj.name) is not obj:
            register_task(obj)
        logger.debug("task plugin %s loaded", where)


def list_tasks() -> list[str]:
    """The canonical task names (model-free ones and plugins' included)."""
    load_plugins()
    return list(TASKS)


def get_task(name: str) -> TaskSpec:
    """The task called `name` (or an alias); UnknownNameError with a did-you-mean otherwise."""
    key = _key(name)
    key = TASK_ALIASES.get(key, key)
    if key not in TASKS:
        load_plugins()
        key = TASK_ALIASES.get(key, key)
    if key not in TASKS:
        choices = [*TASKS, *TASK_ALIASES]
        raise UnknownNameError(f"Unknown task {name!r}; valid: {', '.join(TASKS)} (aliases: "
                               f"{', '.join(TASK_ALIASES)}).{did_you_mean(key, choices)} A task from a "
                               f"plugin module: set ${PLUGIN_ENV}=module (docs/tasks.md)")
    return TASKS[key]


def default_models() -> dict[str, str]:
    """{task name: the hub name of its default model}, for the tasks that have one."""
    load_plugins()
    return {name: spec.default_model for name, spec in TASKS.items() if spec.default_model}


def task_of_architecture(architecture: str) -> TaskSpec | None:
    """The task of a config.json `architectures` entry ("ErnieForTokenClassification"), if any."""
    load_plugins()
    for spec in TASKS.values():
        if spec.needs_model and architecture.endswith(spec.architecture_suffix):
            return spec
    return None


def build_pipeline(task: str, model: Any, tokenizer: Any = None, *, device: Any = None, batch_size: int = 8,
             max_length: int | None = None, **options: Any) -> Any:
    """A pipeline for `task` ("text-classification", "token-classification", "question-answering",
    or an alias such as "ner", "qa", "sentiment-analysis") from a local directory or model object.

    `tokenizer` defaults to the model's directory. Hub names are resolved by `nlp.pipeline`.
    A model-free task is built by `nlp.pipeline(task, **options)`. `options` are the task
    pipeline's own keywords (the lexical pipelines' `user_dict`).
    """
    spec = get_task(task)
    if not spec.needs_model:
        raise ConfigError(f"{spec.name!r} needs no model: call nlp.pipeline({spec.name!r}, **options)")
    spec.check_requirements("predict")
    return spec.pipeline_class(model, tokenizer, device=device, batch_size=batch_size, max_length=max_length, **options)
