"""nlp.tasks: classification, NER, extractive QA, word segmentation — data readers, metrics,
pipelines, named datasets.

Subpackages: `nlp.tasks.classification`, `nlp.tasks.ner`, `nlp.tasks.qa` (each: data.py,
metrics.py, heads, preprocessing, post-processing, pipeline.py, serving.py, and spec.py: what
the engine, the CLI, export and the server need to know, registered in `nlp.tasks.registry`;
docs/tasks.md), `nlp.tasks.segmentation`, `nlp.tasks.datasets`.
"""

from nlp.tasks.classification import classification_metrics, read_classification
from nlp.tasks.datasets import dataset_info, list_datasets, load, load_dataset_by_name
from nlp.tasks.ner import ner_metrics, read_conll, read_paddle_ner
from nlp.tasks.qa import cmrc2018_metrics, read_squad

__all__ = [
    # data and metrics
    "read_classification",
    "read_conll",
    "read_paddle_ner",
    "read_squad",
    "classification_metrics",
    "ner_metrics",
    "cmrc2018_metrics",
    "load",
    "load_dataset_by_name",
    "list_datasets",
    "dataset_info",
    # --- heads, preprocessing, post-processing and pipelines: exported below by the task-layer helper ---
]

from nlp.tasks.classification import (  # noqa: E402
    ErnieForSequenceClassification,
    SequenceClassifierOutput,
    preprocess_classification,
)
from nlp.tasks.ner import (  # noqa: E402
    ErnieForTokenClassification,
    LinearChainCRF,
    TokenClassifierOutput,
    preprocess_ner,
    tags_to_entities,
)
from nlp.tasks.base_pipeline import Pipeline  # noqa: E402
from nlp.tasks.classification.pipeline import TextClassificationPipeline  # noqa: E402
from nlp.tasks.ner.pipeline import TokenClassificationPipeline  # noqa: E402
from nlp.tasks.qa.pipeline import QuestionAnsweringPipeline  # noqa: E402
from nlp.tasks.qa import ErnieForQuestionAnswering, QuestionAnsweringOutput, postprocess_qa, preprocess_qa  # noqa: E402
from nlp.tasks.registry import TASKS, build_pipeline, get_task, list_tasks, register_task  # noqa: E402
from nlp.tasks.spec import TaskSettings, TaskSpec  # noqa: E402

__all__ += [
    "ErnieForSequenceClassification",
    "ErnieForTokenClassification",
    "ErnieForQuestionAnswering",
    "SequenceClassifierOutput",
    "TokenClassifierOutput",
    "QuestionAnsweringOutput",
    "LinearChainCRF",
    "preprocess_classification",
    "preprocess_ner",
    "preprocess_qa",
    "postprocess_qa",
    "tags_to_entities",
    "build_pipeline",
    "Pipeline",
    "TextClassificationPipeline",
    "TokenClassificationPipeline",
    "QuestionAnsweringPipeline",
    "TASKS",
    "TaskSpec",
    "TaskSettings",
    "get_task",
    "list_tasks",
    "register_task",
]
