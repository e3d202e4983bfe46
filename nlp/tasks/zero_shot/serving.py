"""How `POST /predict` takes and answers zero-shot classification (nlp/tasks/serving.py), in the
Inference API's shape:

    {"inputs": "text" | ["text", ...],
     "parameters": {"candidate_labels": ["体育", "财经"], "hypothesis_template": "这是一条关于{}的新闻",
                    "multi_label": false}}
    -> {"sequence", "labels", "scores"} per text (a list of them for a list of texts)

`candidate_labels` is required; it and the template are checked before the request is queued
(422 naming what is wrong). Requests with the same labels, template and multi_label share one
forward pass, and the labels' vectors are kept between requests (pipeline.py).
"""

from __future__ import annotations

from typing import Any

from nlp._common import ConfigError
from nlp.tasks.serving import RequestError, ServingAdapter
from nlp.tasks.zero_shot.labels import DEFAULT_TEMPLATE, check_labels, hypotheses

__all__ = ["ZeroShotAdapter"]

_WARM_UP_LABELS = ("甲", "乙")  # the server's warm-up batch runs before any request names labels
_ANSWER = {"type": "object", "properties": {"sequence": {"type": "string"},
                                            "labels": {"type": "array", "items": {"type": "string"}},
                                            "scores": {"type": "array", "items": {"type": "number"}}}}


class ZeroShotAdapter(ServingAdapter):
    output_description = ("{sequence, labels, scores} per text, labels best first (a list of them for a "
                          "list of texts)")

    def check_params(self, params: dict[str, Any], served: Any) -> None:
        if params.get("candidate_labels") is None:
            raise RequestError(422, "parameters.candidate_labels is required: the labels to choose from, "
                                    "e.g. [\"体育\", \"财经\"]")
        try:
            labels = check_labels(params["candidate_labels"])
            hypotheses(labels, params.get("hypothesis_template", DEFAULT_TEMPLATE))
        except ConfigError as err:
            raise RequestError(422, f"parameters.{err}") from None

    def call_key(self, params: dict[str, Any]) -> tuple:
        labels = params.get("candidate_labels")
        return (("candidate_labels", tuple(labels) if labels else _WARM_UP_LABELS),
                ("hypothesis_template", params.get("hypothesis_template", DEFAULT_TEMPLATE)),
                ("multi_label", bool(params.get("multi_label", False))))

    def run(self, served: Any, items: list[Any], key: tuple) -> list[Any]:
        options = dict(key)
        return served.pipeline(items, list(options.pop("candidate_labels")), **options)

    def response_schema(self) -> dict[str, Any]:
        return {"oneOf": [_ANSWER, {"type": "array", "items": _ANSWER}]}
