"""How `POST /predict` takes and answers information extraction (nlp/tasks/serving.py):

    {"inputs": "text" | ["text", ...], "parameters": {"schema": [...], "position_prob": 0.5}}
    ->  {type: [{"text", "start", "end", "probability"[, "relations"]}]} per text

The schema is checked before the request is queued (422 naming the bound it breaks: depth,
number of type names, a name's length; schema.py), and requests with the same schema and
threshold share forward passes.
"""

from __future__ import annotations

import re
from typing import Any

from nlp.tasks.extraction.preprocess import prompt_room
from nlp.tasks.extraction.schema import (MAX_PROMPT_CHARS, MAX_SCHEMA_DEPTH, MAX_SCHEMA_PROMPTS, SchemaError,
                                         count_prompts, parse_schema, schema_from_key, schema_key)
from nlp.tasks.serving import RequestError, ServingAdapter, windows

__all__ = ["InformationExtractionAdapter", "WARM_UP_SCHEMA"]

# what the server's warm-up batches ask (one prompt a text: one row a text) when the model has no
# schema of its own; a request without a schema is refused before it gets here
WARM_UP_SCHEMA = ["时间"]

_SPAN = {"type": "object", "properties": {
    "text": {"type": "string"}, "start": {"type": "integer", "description": "character offset into the text sent"},
    "end": {"type": "integer", "description": "exclusive"}, "probability": {"type": "number"},
    "relations": {"type": "object", "description": "role -> spans, asked of this span"}}}
_RESULT = {"type": "object", "additionalProperties": {"type": "array", "items": _SPAN}}


class InformationExtractionAdapter(ServingAdapter):
    summary = "Spans of the schema's types (and their relations) in each text"
    parameters = {"schema": (f"the types to extract, as Taskflow takes them: [\"时间\", {{\"竞赛名称\": [\"主办方\"]}}], "
                             f"or names separated by commas; at most {MAX_SCHEMA_DEPTH} levels, "
                             f"{MAX_SCHEMA_PROMPTS} names, {MAX_PROMPT_CHARS} characters a name")}
    output_description = "{type: [span]} per text (a list of them for a list of texts)"

    def check_params(self, params: dict[str, Any], served: Any) -> None:
        if "schema" not in params or params["schema"] is None:
            if getattr(served.pipeline, "schema", None) is None:
                raise RequestError(422, "parameters.schema is missing: send the types to extract, e.g. "
                                        "{\"schema\": [\"人物\", \"地点\"]}")
            return
        schema = params["schema"]
        if isinstance(schema, str):  # "人物，地点" typed into a form: the names, as `nlp predict --schema` takes them
            schema = [name for name in re.split(r"[,，]", schema) if name.strip()] or schema
        try:
            params["schema"] = parse_schema(schema, "parameters.schema")
        except SchemaError as err:
            raise RequestError(422, str(err)) from None

    def call_key(self, params: dict[str, Any]) -> tuple:
        schema = params.get("schema")
        key = schema_key(schema) if isinstance(schema, tuple) else None
        return (*super().call_key(params), ("schema", key))

    def cost(self, item: Any, params: dict[str, Any], max_length: int) -> tuple[int, int]:
        schema = params.get("schema")
        prompts = count_prompts(schema) if isinstance(schema, tuple) else 1
        room = max(1, max_length - prompt_room(max_length) - 3)
        return prompts * windows(len(item), room, min(32, room // 2)), min(len(item) + 3 + 8, max_length)

    def run(self, served: Any, items: list[Any], key: tuple) -> list[Any]:
        options = dict(key)
        schema = options.pop("schema")
        if schema is not None:
            schema = schema_from_key(schema)
        elif getattr(served.pipeline, "schema", None) is None:
            schema = WARM_UP_SCHEMA
        return served.pipeline(items, schema=schema, **options)

    def request_schema(self) -> dict[str, Any]:
        schema = super().request_schema()
        param = schema["properties"]["parameters"]["properties"]["schema"]
        # no "type": the playground takes it as JSON when it parses, else as text (names by commas)
        param["oneOf"] = [{"type": "string"}, {"type": "array"}, {"type": "object"}]
        return schema

    def response_schema(self) -> dict[str, Any]:
        return {"oneOf": [_RESULT, {"type": "array", "items": _RESULT}]}
