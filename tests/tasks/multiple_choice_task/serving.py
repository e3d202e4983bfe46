"""POST /predict for multiple choice: {"inputs": {"question", "choices"} | [...]}."""

from __future__ import annotations

from typing import Any

from nlp.tasks.serving import Limits, RequestError, ServingAdapter, check_text, short

__all__ = ["MultipleChoiceAdapter"]

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
        return served.pipeline([q for q, _ in items], [c for _, c in items])

    def input_schema(self) -> dict[str, Any]:
        return {"oneOf": [_ITEM, {"type": "array", "items": _ITEM}]}

    def response_schema(self) -> dict[str, Any]:
        return {"oneOf": [_ANSWER, {"type": "array", "items": _ANSWER}]}
