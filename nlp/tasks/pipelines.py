"""The inference pipelines, re-exported (each lives in its task's package since the spec owns
the task: `nlp.tasks.<task>.pipeline`; the base class in `nlp.tasks.base_pipeline`).

    clf = pipeline("text-classification", model="out/")          # a local model directory
    clf(["服务很好", "太难吃了"], top_k=2)  # [[{"label", "score"}, ...], ...]
"""

from nlp.tasks.base_pipeline import Pipeline
from nlp.tasks.classification.pipeline import TextClassificationPipeline
from nlp.tasks.ner.pipeline import TokenClassificationPipeline
from nlp.tasks.qa.pipeline import QuestionAnsweringPipeline

__all__ = [
    "Pipeline",
    "QuestionAnsweringPipeline",
    "TextClassificationPipeline",
    "TokenClassificationPipeline",
]
