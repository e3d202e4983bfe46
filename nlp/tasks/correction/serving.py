"""How `POST /predict` takes and answers text correction (nlp/tasks/serving.py):

    "inputs": "text" | ["text", ...], "parameters": {"threshold": 0.5, "protected": "张爱文,拼多多"}
    -> {"source", "target", "errors": [{"position", "correction": {wrong: right}, "start", "end", "score"}]}
       per text (PaddleNLP Taskflow's shape, plus offsets and scores; the playground draws it)
"""

from __future__ import annotations

from typing import Any

from nlp.tasks.serving import ServingAdapter, windows

__all__ = ["CorrectionAdapter"]

_ERROR = {"type": "object", "properties": {
    "position": {"type": "integer", "description": "character offset of the wrong character in the text sent"},
    "correction": {"type": "object", "additionalProperties": {"type": "string"},
                   "description": "{wrong character: its correction}"},
    "start": {"type": "integer"}, "end": {"type": "integer", "description": "exclusive"},
    "score": {"type": "number"}}}
_RESULT = {"type": "object", "properties": {"source": {"type": "string"}, "target": {"type": "string"},
                                            "errors": {"type": "array", "items": _ERROR}}}


class CorrectionAdapter(ServingAdapter):
    summary = "Chinese spelling correction"
    output_description = "per text its source, corrected target and errors (a list of them for a list of texts)"

    def cost(self, item: Any, params: dict[str, Any], max_length: int) -> tuple[int, int]:
        room = max_length - 2
        chars = sum(not c.isspace() for c in item)
        return windows(chars, room, max(1, room // 4)), min(chars + 2, max_length)

    def response_schema(self) -> dict[str, Any]:
        return {"oneOf": [_RESULT, {"type": "array", "items": _RESULT}]}
