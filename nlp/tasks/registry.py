"""The task table: task name -> head class, preprocessing, post-processing, metric, pipeline.

One place that says what a task is made of, so the trainer, the CLI and `pipeline` look tasks
up by name instead of each keeping its own list::

    spec = get_task("ner")            # aliases resolve to "token-classification"
    model = spec.head.from_pretrained(d, num_labels=7)
    feats = ds.map(functools.partial(spec.preprocess, tokenizer=tok), batched=True)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from nlp._common import UnknownNameError, did_you_mean
from nlp.models import PreTrainedEncoder
from nlp.tasks.classification.heads import ErnieForSequenceClassification
from nlp.tasks.classification.metrics import classification_metrics
from nlp.tasks.classification.preprocess import preprocess_classification
from nlp.tasks.ner.heads import ErnieForTokenClassification
from nlp.tasks.ner.metrics import ner_metrics
from nlp.tasks.ner.postprocess import tags_to_entities
from nlp.tasks.ner.preprocess import preprocess_ner
from nlp.tasks.pipelines import (
    Pipeline,
    QuestionAnsweringPipeline,
    TextClassificationPipeline,
    TokenClassificationPipeline,
)
from nlp.tasks.qa.heads import ErnieForQuestionAnswering
from nlp.tasks.qa.metrics import cmrc2018_metrics
from nlp.tasks.qa.postprocess import postprocess_qa
from nlp.tasks.qa.preprocess import preprocess_qa

__all__ = ["TASKS", "TASK_ALIASES", "TaskSpec", "get_task", "list_tasks"]


@dataclass(frozen=True)
class TaskSpec:
    """What a task is made of. `postprocess` is None where the logits' argmax is the answer."""

    name: str
    head: type[PreTrainedEncoder]
    preprocess: Callable
    metric: Callable
    pipeline: type[Pipeline]
    postprocess: Callable | None = None


TASKS: dict[str, TaskSpec] = {
    "text-classification": TaskSpec("text-classification", ErnieForSequenceClassification,
                                    preprocess_classification, classification_metrics,
                                    TextClassificationPipeline),
    "token-classification": TaskSpec("token-classification", ErnieForTokenClassification,
                                     preprocess_ner, ner_metrics, TokenClassificationPipeline,
                                     tags_to_entities),
    "question-answering": TaskSpec("question-answering", ErnieForQuestionAnswering, preprocess_qa,
                                   cmrc2018_metrics, QuestionAnsweringPipeline, postprocess_qa),
}

# Other names people use for the same tasks (transformers' and PaddleNLP's).
TASK_ALIASES: dict[str, str] = {
    "classification": "text-classification",
    "sequence-classification": "text-classification",
    "sentiment-analysis": "text-classification",
    "ner": "token-classification",
    "qa": "question-answering",
    "extractive-qa": "question-answering",
}


def list_tasks() -> list[str]:
    """The canonical task names."""
    return list(TASKS)


def get_task(name: str) -> TaskSpec:
    """The task called `name` (or an alias); UnknownNameError with a did-you-mean otherwise."""
    key = str(name).strip().lower().replace("_", "-")
    key = TASK_ALIASES.get(key, key)
    if key not in TASKS:
        choices = [*TASKS, *TASK_ALIASES]
        raise UnknownNameError(f"Unknown task {name!r}; valid: {', '.join(TASKS)} (aliases: "
                               f"{', '.join(TASK_ALIASES)}).{did_you_mean(key, choices)}")
    return TASKS[key]
