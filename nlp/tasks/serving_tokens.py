"""text-embeddings-inference's `/tokenize` and `/decode`, on every task's server: they need only
the served model's tokenizer, which every task has (nlp/tasks/serving.py says how a route is served).

    POST /tokenize  {"inputs": "text" | ["text", ...], "add_special_tokens": true}
                    -> [[{"id", "text", "special", "start", "stop"}, ...], ...]   (one list per text,
                       always a list of them; `start` / `stop` are character offsets into the text
                       sent and `text` is that slice of it; a special token has its own string as
                       `text` and null offsets, as TEI answers)
    POST /decode    {"ids": [int, ...] | [[int, ...], ...], "skip_special_tokens": true}
                    -> ["text", ...]   (one string per sequence, always a list of them)

Errors are TEI's `{"error": message, "error_type": ...}`, as on the other TEI routes.
"""

from __future__ import annotations

from typing import Any, Mapping

from nlp.tasks.serving import Limits, Parsed, RequestError, ServingAdapter, as_list, check_text, short

__all__ = ["DecodeAdapter", "TeiErrors", "TokenizeAdapter", "token_routes"]

_TEXTS = {"oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]}
_IDS = {"type": "array", "items": {"type": "integer", "minimum": 0}}


class TeiErrors(ServingAdapter):
    """Errors in text-embeddings-inference's shape."""

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        return {"error": message, "error_type": "Validation" if status in (400, 413, 422) else "Overloaded"}


def _fields(payload: Mapping[str, Any], fields: tuple[str, ...], route: str) -> None:
    extra = [k for k in payload if k not in fields]
    if extra:
        raise RequestError(422, f"unknown field {extra[0]!r}; {route} takes {' and '.join(fields)}")
    if fields[0] not in payload:
        raise RequestError(422, f"the body lacks \"{fields[0]}\"")


def _flag(payload: Mapping[str, Any], name: str, default: bool) -> bool:
    value = payload.get(name, default)
    if not isinstance(value, bool):
        raise RequestError(422, f"`{name}` must be true or false, got {short(value)}")
    return value


def _tokenizer(served: Any) -> Any:
    return served.pipeline.tokenizer


class TokenizeAdapter(TeiErrors):
    """POST /tokenize: each text's tokens with their ids and character offsets."""

    summary = "Tokens of each text with ids and character offsets (text-embeddings-inference's /tokenize)"
    output_description = "one list of tokens per text, always a list of them"
    body_fields = ("inputs", "add_special_tokens")

    def parse_body(self, payload: Mapping[str, Any], served: Any, limits: Limits) -> Parsed:
        _fields(payload, self.body_fields, "/tokenize")
        special = _flag(payload, "add_special_tokens", True)
        raw, single = as_list(payload["inputs"], "inputs", limits)
        wheres = ["inputs" if single else f"inputs[{i}]" for i in range(len(raw))]
        # blank text is refused as everywhere else; a text the tokenizer makes nothing of is
        # answered (its tokens are what the caller asks about)
        items = [check_text(x, where, limits) for x, where in zip(raw, wheres)]
        return Parsed(items, single, {}, (("add_special_tokens", special),),
                      rows=len(items), row_tokens=max(len(t) + 2 for t in items))

    def run(self, served: Any, items: list[Any], key: tuple) -> list[Any]:
        special = dict(key)["add_special_tokens"]
        enc = _tokenizer(served)(list(items), add_special_tokens=special, return_offsets_mapping=True)
        out = []
        for row, text in enumerate(items):
            ids, seq, offsets = enc["input_ids"][row], enc.sequence_ids(row), enc.offsets(row)
            tokens = enc.tokens(row)
            out.append([{"id": int(i), "text": tok if s is None else text[a:b], "special": s is None,
                         "start": None if s is None else int(a), "stop": None if s is None else int(b)}
                        for i, s, (a, b), tok in zip(ids, seq, offsets, tokens)])
        return out

    def respond(self, shaped: list[Any], parsed: Parsed) -> Any:
        return shaped

    def request_schema(self) -> dict[str, Any]:
        return {"type": "object", "required": ["inputs"], "additionalProperties": False,
                "properties": {"inputs": _TEXTS, "add_special_tokens": {"type": "boolean", "default": True}}}

    def response_schema(self) -> dict[str, Any]:
        token = {"type": "object", "required": ["id", "text", "special", "start", "stop"],
                 "properties": {"id": {"type": "integer"}, "text": {"type": "string"},
                                "special": {"type": "boolean"},
                                "start": {"type": ["integer", "null"]}, "stop": {"type": ["integer", "null"]}}}
        return {"type": "array", "items": {"type": "array", "items": token}}


class DecodeAdapter(TeiErrors):
    """POST /decode: token ids -> text, one string per sequence."""

    summary = "Text of token ids (text-embeddings-inference's /decode)"
    output_description = "one string per sequence of ids, always a list of them"
    body_fields = ("ids", "skip_special_tokens")

    def parse_body(self, payload: Mapping[str, Any], served: Any, limits: Limits) -> Parsed:
        _fields(payload, self.body_fields, "/decode")
        skip = _flag(payload, "skip_special_tokens", True)
        ids = payload["ids"]
        if not isinstance(ids, list):
            raise RequestError(422, f"\"ids\" must be a list of token ids or a list of such lists, got {short(ids)}")
        single = not ids or not isinstance(ids[0], list)
        rows, _ = as_list([ids] if single else ids, "ids", limits)
        vocab = len(_tokenizer(served))
        for r, row in enumerate(rows):
            where = "ids" if single else f"ids[{r}]"
            if not isinstance(row, list):
                raise RequestError(422, f"{where} must be a list of token ids, got {short(row)}")
            if len(row) > limits.max_text_chars:
                raise RequestError(413, f"{where} has {len(row)} ids; this server takes at most "
                                        f"{limits.max_text_chars} (--max-text-chars)")
            for k, i in enumerate(row):
                if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < vocab:
                    raise RequestError(422, f"{where}[{k}] must be a token id, an integer in [0, {vocab}) "
                                            f"(the model's vocabulary), got {short(i)}")
        return Parsed([list(r) for r in rows], single, {}, (("skip_special_tokens", skip),),
                      rows=len(rows), row_tokens=max(1, max(len(r) for r in rows)))

    def run(self, served: Any, items: list[Any], key: tuple) -> list[Any]:
        return _tokenizer(served).batch_decode(items, skip_special_tokens=dict(key)["skip_special_tokens"])

    def respond(self, shaped: list[Any], parsed: Parsed) -> Any:
        return shaped

    def request_schema(self) -> dict[str, Any]:
        return {"type": "object", "required": ["ids"], "additionalProperties": False,
                "properties": {"ids": {"oneOf": [_IDS, {"type": "array", "items": _IDS}]},
                               "skip_special_tokens": {"type": "boolean", "default": True}}}

    def response_schema(self) -> dict[str, Any]:
        return {"type": "array", "items": {"type": "string"}}


def token_routes(task: str) -> dict[str, ServingAdapter]:
    """The tokenizer's routes, named for `task` in their messages."""
    routes: dict[str, ServingAdapter] = {"/tokenize": TokenizeAdapter(), "/decode": DecodeAdapter()}
    for adapter in routes.values():
        adapter.task = task
    return routes
