"""How `POST /predict` takes and answers the lexical tasks (nlp/tasks/serving.py):

    "inputs": "text" | ["text", ...]  ->  per text, the pipeline's own output:
    lexical-analysis   {"words": [{"word", "start", "end", "pos"}], "entities": [{"type", "text", "start", "end"}]}
    pos-tagging        [{"word", "start", "end", "pos"}]
    word-segmentation  [{"word", "start", "end"}]

Offsets are character offsets into the text sent, end exclusive.
"""

from __future__ import annotations

from typing import Any

from nlp.tasks.serving import ServingAdapter, windows

__all__ = ["LexicalAnalysisAdapter", "PosTaggingAdapter", "SegmentationAdapter"]

_OFFSETS = {"start": {"type": "integer", "description": "character offset into the text sent"},
            "end": {"type": "integer", "description": "exclusive"}}
_WORD = {"type": "object", "properties": {"word": {"type": "string"}, **_OFFSETS}}
_TAGGED = {"type": "object", "properties": {"word": {"type": "string"}, "pos": {"type": "string"}, **_OFFSETS}}
_ENTITY = {"type": "object", "properties": {"type": {"type": "string", "enum": ["PER", "LOC", "ORG"]},
                                            "text": {"type": "string"}, **_OFFSETS}}


class _CharacterAdapter(ServingAdapter):
    """Windows of characters, as the NER adapter counts them."""

    parameters: dict[str, str] = {}
    one: dict[str, Any] = {}

    def cost(self, item: Any, params: dict[str, Any], max_length: int) -> tuple[int, int]:
        room = max_length - 2
        chars = sum(not c.isspace() for c in item)
        return windows(chars, room, max(1, room // 4)), min(chars + 2, max_length)

    def response_schema(self) -> dict[str, Any]:
        return {"type": "array", "items": {"oneOf": [self.one, {"type": "array", "items": self.one}]}}


class LexicalAnalysisAdapter(_CharacterAdapter):
    output_description = "the words (with POS) and entities of the text (a list of them for a list of texts)"
    one = {"type": "object", "properties": {"words": {"type": "array", "items": _TAGGED},
                                            "entities": {"type": "array", "items": _ENTITY}}}

    def response_schema(self) -> dict[str, Any]:
        return {"oneOf": [self.one, {"type": "array", "items": self.one}]}


class PosTaggingAdapter(_CharacterAdapter):
    output_description = "the words of the text with their POS (a list of them for a list of texts)"
    one = _TAGGED


class SegmentationAdapter(_CharacterAdapter):
    output_description = "the words of the text (a list of them for a list of texts)"
    one = _WORD
