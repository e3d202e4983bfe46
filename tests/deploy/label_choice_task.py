"""A task written from outside `nlp` for the playground's browser tests, registered when imported
(`NLP_TASK_PLUGINS=label_choice_task`, with tests/deploy on PYTHONPATH): text classification
whose /predict takes typed options (a list of labels, a bounded integer, a boolean: JSON schema
`type`, `minimum`, `maximum`, `default`) and answers zero-shot classification's shape
(`{"labels": [...], "scores": [...]}`). The playground has no code for it: its form comes from
the options' schema and its drawing from the answer's shape."""

from __future__ import annotations

from typing import Any

from nlp.tasks import register_task
from nlp.tasks.classification.serving import ClassificationAdapter
from nlp.tasks.classification.spec import ClassificationSpec
from nlp.tasks.serving import RequestError, int_param, short

MAX_K = 5


class LabelChoiceAdapter(ClassificationAdapter):
    parameters = {"candidate_labels": "the labels to choose among (default: all the model's)",
                  "top_k": "how many labels to return, best first",
                  "normalize": "scale the returned scores to sum to 1"}

    def check_params(self, params: dict[str, Any], served: Any) -> None:
        labels = params.get("candidate_labels")
        if labels is not None:
            if not isinstance(labels, list) or not labels or not all(isinstance(x, str) for x in labels):
                raise RequestError(422, f"parameters.candidate_labels must be a list of label names, got {short(labels)}")
            unknown = [x for x in labels if x not in served.labels]
            if unknown:
                raise RequestError(422, f"unknown label {unknown[0]!r}; this model has {', '.join(served.labels)}")
        int_param(params, "top_k", minimum=1, maximum=MAX_K)
        if not isinstance(params.get("normalize", True), bool):
            raise RequestError(422, f"parameters.normalize must be true or false, got {short(params['normalize'])}")

    def shape(self, output: Any, params: dict[str, Any]) -> Any:
        scores = {o["label"]: o["score"] for o in output}
        labels = params.get("candidate_labels") or list(scores)
        picked = sorted(labels, key=lambda label: -scores[label])[:params.get("top_k", MAX_K)]
        values = [scores[label] for label in picked]
        if params.get("normalize", True):
            values = [v / sum(values) for v in values]
        return {"labels": picked, "scores": values}

    def request_schema(self) -> dict[str, Any]:
        schema = super().request_schema()
        schema["properties"]["parameters"]["properties"] = {
            "candidate_labels": {"type": "array", "items": {"type": "string"},
                                 "description": self.parameters["candidate_labels"]},
            "top_k": {"type": "integer", "minimum": 1, "maximum": MAX_K, "default": MAX_K,
                      "description": self.parameters["top_k"]},
            "normalize": {"type": "boolean", "default": True, "description": self.parameters["normalize"]},
        }
        return schema


class LabelChoiceSpec(ClassificationSpec):
    name = "label-choice-test"
    aliases = ()
    serving = LabelChoiceAdapter()


register_task(LabelChoiceSpec())
