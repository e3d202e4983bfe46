"""POST /predict for multiple choice: {"inputs": {"question", "choices"} | [...]}; and a route of
the task's own, POST /scores: {"question", "choices"} -> one probability per choice, with
TEI's error shape ({"error", "error_type"}): a route the server answers with no change in it."""

from __future__ import annotations

from typing import Any

from nlp.tasks.serving import Limits, Parsed, RequestError, ServingAdapter, check_text, short

__all__ = ["MultipleChoiceAdapter", "ScoresAdapter"]

_ITEM = {"type": "object", "required": ["question", "choices"], "additionalProperties": False,
         "properties": {"question": {"type": "string"},
                        "choices": {"type": "array", "items": {"type": "string"}, "minItems": 2}}}
_ANSWER = {"type": "object", "properties": {"label": {"type": "integer"}, "choice": {"type": "string"},
                                            "score": {"type": "number"},
                                            "scores": {"type": "array", "items": {"type": "number"}}}}


class MultipleChoiceAdapter(ServingAdapter):
    summary = "Pick the right answer among the choices"
    output_description = "the chosen answer per question (a list of them for a list of questions)"

    def item(self, value: Any, where: str, limits: Limits) -> Any:
        if not isinstance(value, dict) or set(value) != {"question", "choices"}:
            raise RequestError(422, f"{where} must be an object {{\"question\": ..., \"choices\": [...]}}, "
                                    f"got {short(value)}")
        choices = value["choices"]
        if not isinstance(choices, list) or len(choices) < 2:
            raise RequestError(422, f"{where}.choices must be a list of at least 2 strings, got {short(choices)}")
        return (check_text(value["question"], f"{where}.question", limits),
                [check_text(c, f"{where}.choices[{i}]", limits) for i, c in enumerate(choices)])

    def cost(self, item: Any, params: dict[str, Any], max_length: int) -> tuple[int, int]:
        q, choices = item
        return len(choices), min(len(q) + max(map(len, choices)) + 3, max_length)

    def warm_up_items(self, max_length: int, n: int) -> list[Any]:
        half = max(1, (max_length - 3) // 2)
        return [("中" * half, ["中" * half, "中" * half])] * max(1, n // 2)

    def run(self, served: Any, items: list[Any], key: tuple) -> list[Any]:
        return served.pipeline([q for q, _ in items], [c for _, c in items], **dict(key))

    def input_schema(self) -> dict[str, Any]:
        return {"oneOf": [_ITEM, {"type": "array", "items": _ITEM}]}

    def response_schema(self) -> dict[str, Any]:
        return {"oneOf": [_ANSWER, {"type": "array", "items": _ANSWER}]}


class ScoresAdapter(MultipleChoiceAdapter):
    summary = "One probability per choice"
    output_description = "the choices' probabilities, in order"
    body_fields = ("question", "choices")

    def parse_body(self, payload: Any, served: Any, limits: Limits) -> Parsed:
        extra = [k for k in payload if k not in self.body_fields]
        if extra:
            raise RequestError(422, f"unknown field {extra[0]!r}; the body takes question and choices")
        item = self.item(payload, "the body", limits)
        rows, tokens = self.cost(item, {}, served.max_length)
        return Parsed([item], True, {}, (), rows=rows, row_tokens=tokens)

    def shape(self, output: Any, params: dict[str, Any]) -> Any:
        return output["scores"]

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        return {"error": message, "error_type": "Validation" if status == 422 else "Overloaded"}

    def request_schema(self) -> dict[str, Any]:
        return _ITEM

    def response_schema(self) -> dict[str, Any]:
        return {"type": "array", "items": {"type": "number"}}
