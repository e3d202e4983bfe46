"""How a task is served over HTTP: a `ServingAdapter` per route, from the task's spec.

The model server (`nlp.deploy.server`) knows no task: for each route of
`spec.serving_routes()` (default: `{"/predict": spec.serving}`) it reads the JSON body, asks the
route's adapter to parse and check it (`parse_body`, raising `RequestError` 413 / 422), queues
the parsed items with their cost on the one batcher, runs each batch through `adapter.run` and
shapes each request's share with `adapter.shape`. Every route thus gets the same batching,
limits (413 / 422 / 429), metrics and bearer-token check as `/predict`. `request_schema` /
`response_schema` are the route's JSON schemas in the OpenAPI document; `error_body` the JSON
of an error (TEI's routes answer TEI's error shape)::

    class EmbedAdapter(ServingAdapter):          # a task adding TEI's POST /embed
        summary = "sentence vectors"
        def parse_body(self, payload, served, limits): ...   # {"inputs", "normalize", "truncate"}
        def run(self, served, items, key): return served.pipeline(items)
    class EmbeddingSpec(TaskSpec):
        def serving_routes(self): return {"/predict": self.serving, "/embed": EmbedAdapter()}

`served` is the server's loaded model (`nlp.deploy.server_model.ServingModel`: `.pipeline`,
`.max_length`, `.labels`); this layer only reads those attributes.
A request's cost for the batcher is counted in tokens, one per character (the Chinese
vocabularies of this toolkit give at most about one token per character), windows included.
"""

from __future__ import annotations

import math
import reprlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

from nlp._common import did_you_mean
from nlp.tasks.base_pipeline import UNKNOWN_ONLY
from nlp.tasks.options import CallOption, OptionError, check_options

__all__ = ["Limits", "Parsed", "RequestError", "ServingAdapter", "FieldsAdapter",
           "as_list", "check_text", "int_param", "refuse_tokenless", "split_outputs", "windows", "short"]


class RequestError(Exception):
    """A request the server refuses: `status` 413 (too large) or 422 (malformed)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(frozen=True)
class Limits:
    max_inputs: int       # inputs in one request
    max_text_chars: int   # characters in one text (a QA question and its context each)


@dataclass
class Parsed:
    """A request, checked: its inputs, whether it sent one input (not a list), its parameters,
    the key of the pipeline call it can share, and its cost (windows, longest window's tokens)."""

    items: list[Any]
    single: bool
    params: dict[str, Any]
    key: tuple
    rows: int
    row_tokens: int


_REPR = reprlib.Repr()  # bounded in depth (6 levels): a deeply nested value is shown, not recursed into
_REPR.maxstring = _REPR.maxother = 40


def short(value: Any) -> str:
    text = _REPR.repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def as_list(inputs: Any, what: str, limits: Limits) -> tuple[list[Any], bool]:
    """(items, single): one input or a non-empty list of at most `limits.max_inputs` (else 422 / 413)."""
    single = not isinstance(inputs, list)
    items = [inputs] if single else inputs
    if not items:
        raise RequestError(422, f"`{what}` is an empty list; send at least one input")
    if len(items) > limits.max_inputs:
        raise RequestError(413, f"{len(items)} inputs in one request; this server takes at most "
                                f"{limits.max_inputs} (--max-inputs). Split the request.")
    return items, single


def check_text(value: Any, where: str, limits: Limits) -> str:
    """A non-blank string of at most `limits.max_text_chars` characters, valid Unicode (else 422 / 413)."""
    if not isinstance(value, str):
        raise RequestError(422, f"{where} must be a string, got {type(value).__name__} ({short(value)})")
    if not value.strip():
        raise RequestError(422, f"{where} is empty")
    if len(value) > limits.max_text_chars:
        raise RequestError(413, f"{where} has {len(value)} characters; this server takes at most "
                                f"{limits.max_text_chars} (--max-text-chars)")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as err:  # a lone surrogate escaped in the JSON ("\ud800")
        raise RequestError(422, f"{where} is not valid Unicode text: {err.reason} at character {err.start}") from None
    return value


def refuse_tokenless(served: Any, texts: Sequence[str], wheres: Sequence[str]) -> None:
    """422 naming the first text the served model's tokenizer makes no token of (only characters
    it drops: NUL, ZWSP, BOM, U+FE0F, a lone combining mark): as `check_text` refuses a blank one,
    since such a text is blank to the model (its answer would be the model's for [CLS] [SEP]
    alone). A pipeline without a tokenizer (`tokenless`) is not asked."""
    pipeline = getattr(served, "pipeline", None)
    tokenless = getattr(pipeline, "tokenless", None)
    if tokenless is None or not texts:
        return
    bad = tokenless(list(texts))
    if bad:
        more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
        raise RequestError(422, f"{wheres[bad[0]]} has no tokens{more}: it holds only characters the tokenizer drops "
                                f"({short(texts[bad[0]])}: controls such as NUL, format characters such as ZWSP or "
                                "BOM, variation selectors, lone combining marks), so it is blank to the model; "
                                "send text with some content")
    if getattr(pipeline, "on_tokenless", "empty") == "error":  # its answer would be the model's for [UNK] alone
        bad = pipeline.unknown_only(list(texts))
        if bad:
            more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
            raise RequestError(422, f"{wheres[bad[0]]} ({short(texts[bad[0]])}) {UNKNOWN_ONLY}{more}, so every such "
                                    "text would get the same answer; send text with some characters it knows")


def int_param(params: dict, name: str, *, minimum: int, allow_none: bool = False, maximum: int | None = None,
              why: str = "") -> None:
    """422 unless params[name] (when given) is an integer in [minimum, maximum] (or null, when allowed);
    `why` says where the maximum comes from."""
    if name not in params:
        return
    v = params[name]
    if v is None and allow_none:
        return
    if isinstance(v, bool) or not isinstance(v, int) or v < minimum or (maximum is not None and v > maximum):
        none = " or null" if allow_none else ""
        bound = f" and <= {maximum}{why}" if maximum is not None else ""
        raise RequestError(422, f"parameters.{name} must be an integer >= {minimum}{bound}{none}, got {short(v)}")


def windows(tokens: int, room: int, stride: int) -> int:
    """How many windows of `room` tokens, overlapping by `stride`, cover `tokens` tokens."""
    if tokens <= room:
        return 1
    return 1 + math.ceil((tokens - room) / max(1, room - stride))


_TEXTS_SCHEMA = {"oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]}


class ServingAdapter:
    """One route of a task: parse a request, run a batch of inputs through the pipeline, shape
    one request's output. The defaults serve a task whose inputs are texts
    (`{"inputs": "text" | ["text", ...], "parameters": {...}}`) and return the pipeline's output."""

    task: str = ""  # for messages; the server sets it to the spec's name
    summary: str = ""  # the route's one-line summary in the OpenAPI document
    # the task's call options served as `parameters` (its spec's `call_options` for "serve"; the
    # spec sets them): checked, keyed and documented from their declaration
    options: tuple[CallOption, ...] = ()
    parameters: dict[str, str] = {}  # other parameters of a route: name -> what it does (its own checks)
    output_description: str = "the pipeline's output per input (a list of them for a list of inputs)"
    body_fields: tuple[str, ...] = ("inputs", "parameters")  # the keys a body may hold

    def parse_body(self, payload: Mapping[str, Any], served: Any, limits: Limits) -> Parsed:
        """A decoded JSON object -> the checked request (RequestError 422 / 413 otherwise)."""
        extra = [k for k in payload if k not in self.body_fields]
        if extra:
            raise RequestError(422, f"unknown field {extra[0]!r} in the body; it takes {' and '.join(self.body_fields)}"
                                    f"{did_you_mean(extra[0], self.body_fields)}")
        if "inputs" not in payload:
            raise RequestError(422, "the body lacks \"inputs\"")
        params = payload.get("parameters")
        params = {} if params is None else params
        if not isinstance(params, dict):
            raise RequestError(422, f"\"parameters\" must be an object, got a JSON {type(params).__name__}")
        return self.parse(payload["inputs"], params, served, limits)

    def parameter_names(self) -> list[str]:
        """Every parameter the route takes: the declared options, then its own."""
        return [*(o.name for o in self.options), *self.parameters]

    def parse(self, body_inputs: Any, params: dict[str, Any], served: Any, limits: Limits) -> Parsed:
        names = self.parameter_names()
        unknown = [k for k in params if k not in names]
        if unknown:
            valid = ", ".join(names) or "none"
            raise RequestError(422, f"unknown parameter {unknown[0]!r} for {self.task} (valid: {valid})"
                                    f"{did_you_mean(unknown[0], names)}")
        declared = {o.name for o in self.options}
        try:
            check_options(self.options, {k: v for k, v in params.items() if k in declared}, use="serve",
                          max_length=served.max_length, task=self.task, where="parameters.{name}")
        except OptionError as err:
            raise RequestError(422, str(err)) from None
        self.check_params(params, served)
        raw, single = as_list(body_inputs, "inputs", limits)
        wheres = ["inputs" if single else f"inputs[{i}]" for i in range(len(raw))]
        items = [self.item(x, where, limits) for x, where in zip(raw, wheres)]
        self.check_tokens(items, wheres, served)
        costs = [self.cost(x, params, served.max_length) for x in items]
        return Parsed(items, single, params, self.call_key(params),
                      rows=sum(r for r, _ in costs), row_tokens=max(t for _, t in costs))

    def check_params(self, params: dict[str, Any], served: Any) -> None:
        """Checks of the route's own `parameters` (the declared options are checked already)."""

    def item(self, value: Any, where: str, limits: Limits) -> Any:
        return check_text(value, where, limits)

    def check_tokens(self, items: list[Any], wheres: list[str], served: Any) -> None:
        """422 for an input with no tokens (`refuse_tokenless`). Only text items are checked here:
        an adapter whose items are structured (`item` returns a tuple or a dict) knows which of
        their fields are texts and overrides this, as the pair adapter does."""
        texts = [(it, w) for it, w in zip(items, wheres) if isinstance(it, str)]
        refuse_tokenless(served, [it for it, _ in texts], [w for _, w in texts])

    def cost(self, item: Any, params: dict[str, Any], max_length: int) -> tuple[int, int]:
        """(windows, tokens of the longest window) of one input."""
        return 1, min(len(item) + 2, max_length)

    def call_key(self, params: dict[str, Any]) -> tuple:
        """The pipeline keywords as a hashable key: requests with equal keys share a forward.
        Default: every declared option, given or default."""
        return tuple(sorted({**{o.name: o.default for o in self.options},
                             **{k: v for k, v in params.items() if k in {o.name for o in self.options}}}.items()))

    def warm_up_items(self, max_length: int, n: int) -> list[Any]:
        """`n` inputs of one full-length window each (the server's warm-up batch)."""
        return ["中" * (max_length - 2)] * n

    def run(self, served: Any, items: list[Any], key: tuple) -> list[Any]:
        """The pipeline's outputs for `items`, one per item (runs in the batch worker thread)."""
        return served.pipeline(items, **dict(key))

    def shape(self, output: Any, params: dict[str, Any]) -> Any:
        return output

    def respond(self, shaped: list[Any], parsed: Parsed) -> Any:
        """The response body from the shaped outputs (one per input)."""
        return shaped[0] if parsed.single else shaped

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        """The JSON of an error answer on this route."""
        return {"error": HTTPStatus(status).phrase, "message": message}

    # --------------------------------------------------------------- OpenAPI

    def input_schema(self) -> dict[str, Any]:
        """The JSON schema of `inputs`."""
        return _TEXTS_SCHEMA

    def request_schema(self) -> dict[str, Any]:
        params = {o.name: o.json_schema() for o in self.options}
        params.update({name: {"description": doc} for name, doc in self.parameters.items()})
        return {"type": "object", "required": ["inputs"], "additionalProperties": False,
                "properties": {"inputs": self.input_schema(),
                               "parameters": {"type": "object", "additionalProperties": False,
                                              "properties": params}}}

    def response_schema(self) -> dict[str, Any]:
        return {}



class FieldsAdapter(ServingAdapter):
    """Inputs that are objects of string fields (`{"question": ..., "context": ...}`), passed to
    the pipeline as one keyword list per field."""

    fields: tuple[str, ...] = ()

    def item(self, value: Any, where: str, limits: Limits) -> Any:
        if not isinstance(value, dict):
            shape = ", ".join(f'"{f}": ...' for f in self.fields)
            raise RequestError(422, f"{where} must be an object {{{shape}}}, got {type(value).__name__} "
                                    f"({short(value)})")
        extra = [k for k in value if k not in self.fields]
        if extra:
            raise RequestError(422, f"{where} has an unknown field {extra[0]!r}; it takes {' and '.join(self.fields)}"
                                    f"{did_you_mean(extra[0], self.fields)}")
        for k in self.fields:
            if k not in value:
                raise RequestError(422, f"{where} lacks {k!r}")
        return tuple(check_text(value[k], f"{where}.{k}", limits) for k in self.fields)

    def check_tokens(self, items: list[Any], wheres: list[str], served: Any) -> None:
        for k, field in enumerate(self.fields):
            refuse_tokenless(served, [it[k] for it in items], [f"{w}.{field}" for w in wheres])

    def cost(self, item: Any, params: dict[str, Any], max_length: int) -> tuple[int, int]:
        return 1, min(sum(map(len, item)) + 1 + len(item), max_length)

    def warm_up_items(self, max_length: int, n: int) -> list[Any]:
        each = max(1, (max_length - 1 - len(self.fields)) // max(1, len(self.fields)))
        return [tuple("中" * each for _ in self.fields)] * n

    def run(self, served: Any, items: list[Any], key: tuple) -> list[Any]:
        columns = {f: [it[i] for it in items] for i, f in enumerate(self.fields)}
        return served.pipeline(**columns, **dict(key))

    def input_schema(self) -> dict[str, Any]:
        one = {"type": "object", "required": list(self.fields), "additionalProperties": False,
               "properties": {f: {"type": "string"} for f in self.fields}}
        return {"oneOf": [one, {"type": "array", "items": one}]}


def split_outputs(outputs: Sequence[Any], counts: Sequence[int]) -> list[list[Any]]:
    """Cut the outputs of a concatenated batch back into each request's share, in order."""
    parts, i = [], 0
    for n in counts:
        parts.append(list(outputs[i:i + n]))
        i += n
    if i != len(outputs):
        raise RuntimeError(f"the pipeline returned {len(outputs)} outputs for {i} inputs")
    return parts
