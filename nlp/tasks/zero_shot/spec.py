"""The zero-shot classification task: texts against label descriptions, with an embedding model.

It runs the models of `feature-extraction` (the same head and exports; pipeline.py says how it
scores) and trains as that task does; its default model is that task's default, found by the
same lookup, so `nlp.pipeline("zero-shot-classification")` uses whatever embedding model ships.
"""

from __future__ import annotations

from typing import Any

from nlp._common import ConfigError
from nlp.tasks.embedding.spec import EmbeddingSpec
from nlp.tasks.options import CallOption
from nlp.tasks.zero_shot.labels import DEFAULT_TEMPLATE, MAX_LABELS
from nlp.tasks.zero_shot.pipeline import ZeroShotClassificationPipeline
from nlp.tasks.zero_shot.serving import ZeroShotAdapter

__all__ = ["ZeroShotSpec", "ZERO_SHOT_CLASSIFICATION"]

_EMBEDDING_TASK = "feature-extraction"  # whose models (and default model) this task runs


class ZeroShotSpec(EmbeddingSpec):
    name = "zero-shot-classification"
    aliases = ("zero-shot",)
    pipeline_class = ZeroShotClassificationPipeline
    serving = ZeroShotAdapter()
    model_hint = ("an embedding model: a feature-extraction hub name such as multilingual-e5-small, or its "
                  "directory; with none, this task takes feature-extraction's default model")
    result_field = "labels"
    result_fields = ("labels", "scores")
    call_options = (
        CallOption("candidate_labels", list, None, "the labels to choose from (required; a flag takes them "
                   "separated by commas)", minimum=1, maximum=MAX_LABELS),
        CallOption("hypothesis_template", str, DEFAULT_TEMPLATE, "the text a label is put into, where its {} is "
                   "(e.g. 这是一条关于{}的新闻)"),
        CallOption("multi_label", bool, False, "score each label on its own (cosines) instead of a softmax "
                   "over the labels"),
    )

    @property  # type: ignore[override]
    def default_model(self) -> str | None:
        """The embedding task's default model: the lookup `nlp.pipeline("feature-extraction")` makes."""
        from nlp.tasks.registry import get_task

        return get_task(_EMBEDDING_TASK).default_model

    def predict(self, pipe: Any, records: list[dict[str, Any]], *, candidate_labels: list[str] | None = None,
                hypothesis_template: str = DEFAULT_TEMPLATE, multi_label: bool = False) -> list[dict[str, Any]]:
        if candidate_labels is None:
            raise ConfigError("zero-shot-classification needs the labels to choose from: --candidate-labels "
                              "体育,财经,科技")
        answers = pipe([r["text"] for r in records], candidate_labels, hypothesis_template=hypothesis_template,
                       multi_label=multi_label)
        return [{"labels": a["labels"], "scores": a["scores"]} for a in answers]

    def empty_prediction(self) -> dict[str, Any]:
        return {"labels": [], "scores": []}

    def serving_routes(self) -> dict[str, Any]:
        return {"/predict": self.serving}


ZERO_SHOT_CLASSIFICATION = ZeroShotSpec()
