"""How `POST /predict` takes and answers text classification (nlp/tasks/serving.py):

    "inputs": "text" | ["text", ...]  ->  [{"label", "score"}] per text, best first (transformers' shape)
"""

from __future__ import annotations

from typing import Any

from nlp.tasks.serving import ServingAdapter

__all__ = ["ClassificationAdapter", "InferenceRootAdapter"]

_LABEL = {"type": "object", "properties": {"label": {"type": "string"}, "score": {"type": "number"}}}


class ClassificationAdapter(ServingAdapter):
    output_description = "the top_k labels, best first, per text (a list of them for a list of texts)"

    def call_key(self, params: dict[str, Any]) -> tuple:
        return ()  # every request shares the forward: `shape` cuts each answer to its top_k

    def run(self, served: Any, items: list[Any], key: tuple) -> list[Any]:
        # every label's score, so that requests asking for different top_k share one forward
        return served.pipeline(items, top_k=None)

    def shape(self, output: Any, params: dict[str, Any]) -> Any:
        top_k = params.get("top_k", 1)
        return output if top_k is None else output[:top_k]

    def response_schema(self) -> dict[str, Any]:
        return {"type": "array", "items": {"oneOf": [_LABEL, {"type": "array", "items": _LABEL}]}}


class InferenceRootAdapter(ClassificationAdapter):
    """POST /: what huggingface_hub's `InferenceClient.text_classification` sends to an endpoint
    URL (a TEI server or an inference endpoint): /predict's body, answered as the Inference API
    does, a list of labels per text also for one text (the client reads the first list).
    `function_to_apply` is not taken: the scores are the model's own (softmax, or sigmoid for a
    multi-label model)."""

    summary = "Text classification as huggingface_hub's InferenceClient reads it (one list of labels per text)"
    output_description = "one list of {label, score} per text, best first, always a list of them"

    def respond(self, shaped: list[Any], parsed: Any) -> Any:
        return shaped

    def response_schema(self) -> dict[str, Any]:
        return {"type": "array", "items": {"type": "array", "items": _LABEL}}
