"""How `POST /predict` takes and answers NER (nlp/tasks/serving.py):

    "inputs": "text" | ["text", ...]  ->  [{"entity_group", "word", "start", "end", "score"}] per text

transformers' token-classification shape; offsets are character offsets into the text sent.
"""

from __future__ import annotations

from typing import Any

from nlp.tasks.serving import ServingAdapter, windows

__all__ = ["TokenClassificationAdapter"]

_ENTITY = {"type": "object", "properties": {
    "entity_group": {"type": "string"}, "word": {"type": "string"},
    "start": {"type": "integer", "description": "character offset into the text sent"},
    "end": {"type": "integer", "description": "exclusive"}, "score": {"type": "number"}}}


class TokenClassificationAdapter(ServingAdapter):
    parameters = {}
    output_description = "the entities of the text (a list of them for a list of texts)"

    def cost(self, item: Any, params: dict[str, Any], max_length: int) -> tuple[int, int]:
        room = max_length - 2
        chars = sum(not c.isspace() for c in item)
        return windows(chars, room, max(1, room // 4)), min(chars + 2, max_length)

    def shape(self, output: Any, params: dict[str, Any]) -> Any:
        return [{"entity_group": e["type"], "word": e["text"], "start": e["start"], "end": e["end"],
                 "score": e["score"]} for e in output]

    def response_schema(self) -> dict[str, Any]:
        return {"type": "array", "items": {"oneOf": [_ENTITY, {"type": "array", "items": _ENTITY}]}}
