"""What `POST /predict` takes and returns, per task: parsing, cost, the pipeline call, the JSON.

One adapter per task, so the server never branches on a task's name:

    text-classification    "inputs": "text" | ["text", ...]      -> [{"label", "score"}] per text
    token-classification   "inputs": "text" | ["text", ...]      -> [{"entity_group", "word", "start", "end", "score"}]
    question-answering     "inputs": {"question", "context"} | [...] -> {"answer", "score", "start", "end"}

The shapes are transformers' pipeline outputs; offsets are character offsets into the text sent.
A request's cost for the batcher is counted in tokens, one per character (the Chinese
vocabularies of this toolkit give at most about one token per character), windows included.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from nlp._common import did_you_mean
from nlp.deploy.server_model import ServingModel

__all__ = ["ADAPTERS", "Limits", "Parsed", "RequestError", "TaskAdapter", "adapter_for", "split_outputs"]


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


def _as_list(inputs: Any, what: str, limits: Limits) -> tuple[list[Any], bool]:
    single = not isinstance(inputs, list)
    items = [inputs] if single else inputs
    if not items:
        raise RequestError(422, "`inputs` is an empty list; send at least one input")
    if len(items) > limits.max_inputs:
        raise RequestError(413, f"{len(items)} inputs in one request; this server takes at most "
                                f"{limits.max_inputs} (--max-inputs). Split the request.")
    return items, single


def _text(value: Any, where: str, limits: Limits) -> str:
    if not isinstance(value, str):
        raise RequestError(422, f"{where} must be a string, got {type(value).__name__} ({_short(value)})")
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


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _int_param(params: dict, name: str, *, minimum: int, allow_none: bool = False) -> None:
    if name not in params:
        return
    v = params[name]
    if v is None and allow_none:
        return
    if isinstance(v, bool) or not isinstance(v, int) or v < minimum:
        none = " or null" if allow_none else ""
        raise RequestError(422, f"parameters.{name} must be an integer >= {minimum}{none}, got {_short(v)}")


def _windows(tokens: int, room: int, stride: int) -> int:
    """How many windows of `room` tokens, overlapping by `stride`, cover `tokens` tokens."""
    if tokens <= room:
        return 1
    return 1 + math.ceil((tokens - room) / max(1, room - stride))


class TaskAdapter:
    """Parse a request, run a batch of inputs through the pipeline, shape one request's output."""

    task: str = ""
    parameters: dict[str, str] = {}  # name -> what it does (for errors and the OpenAPI document)

    def parse(self, body_inputs: Any, params: dict[str, Any], served: ServingModel, limits: Limits) -> Parsed:
        unknown = [k for k in params if k not in self.parameters]
        if unknown:
            valid = ", ".join(self.parameters) or "none"
            raise RequestError(422, f"unknown parameter {unknown[0]!r} for {self.task} (valid: {valid})"
                                    f"{did_you_mean(unknown[0], self.parameters)}")
        self.check_params(params, served)
        raw, single = _as_list(body_inputs, "inputs", limits)
        items = [self.item(x, f"inputs[{i}]" if not single else "inputs", limits) for i, x in enumerate(raw)]
        costs = [self.cost(x, params, served.max_length) for x in items]
        return Parsed(items, single, params, self.call_key(params),
                      rows=sum(r for r, _ in costs), row_tokens=max(t for _, t in costs))

    def check_params(self, params: dict[str, Any], served: ServingModel) -> None:
        pass

    def item(self, value: Any, where: str, limits: Limits) -> Any:
        return _text(value, where, limits)

    def cost(self, item: Any, params: dict[str, Any], max_length: int) -> tuple[int, int]:
        """(windows, tokens of the longest window) of one input."""
        return 1, min(len(item) + 2, max_length)

    def call_key(self, params: dict[str, Any]) -> tuple:
        """The pipeline keywords as a hashable key: requests with equal keys share a forward."""
        return ()

    def warm_up_items(self, max_length: int, n: int) -> list[Any]:
        """`n` inputs of one full-length window each (the server's warm-up batch)."""
        return ["中" * (max_length - 2)] * n

    def run(self, served: ServingModel, items: list[Any], key: tuple) -> list[Any]:
        """The pipeline's outputs for `items`, one per item (runs in the batch worker thread)."""
        return served.pipeline(items, **dict(key))

    def shape(self, output: Any, params: dict[str, Any]) -> Any:
        return output


class ClassificationAdapter(TaskAdapter):
    task = "text-classification"
    parameters = {"top_k": "how many labels to return per text, best first (default 1; null: all)"}

    def check_params(self, params, served):
        _int_param(params, "top_k", minimum=1, allow_none=True)

    def run(self, served, items, key):
        # every label's score, so that requests asking for different top_k share one forward
        return served.pipeline(items, top_k=None)

    def shape(self, output, params):
        top_k = params.get("top_k", 1)
        return output if top_k is None else output[:top_k]


class TokenClassificationAdapter(TaskAdapter):
    task = "token-classification"
    parameters = {}

    def cost(self, item, params, max_length):
        room = max_length - 2
        chars = sum(not c.isspace() for c in item)
        return _windows(chars, room, max(1, room // 4)), min(chars + 2, max_length)

    def shape(self, output, params):
        return [{"entity_group": e["type"], "word": e["text"], "start": e["start"], "end": e["end"],
                 "score": e["score"]} for e in output]


class QuestionAnsweringAdapter(TaskAdapter):
    task = "question-answering"
    parameters = {
        "top_k": "answers per question (default 1; more than 1 returns a list per question)",
        "max_answer_length": "longest answer in tokens (default 30)",
        "handle_impossible_answer": "answer \"\" when no span beats [CLS] (default false)",
        "doc_stride": "tokens shared by consecutive windows of a long context (default 128)",
    }
    _defaults = {"top_k": 1, "max_answer_length": 30, "handle_impossible_answer": False, "doc_stride": 128}

    def check_params(self, params, served):
        for name in ("top_k", "max_answer_length", "doc_stride"):
            _int_param(params, name, minimum=1)
        v = params.get("handle_impossible_answer", False)
        if not isinstance(v, bool):
            raise RequestError(422, f"parameters.handle_impossible_answer must be true or false, got {_short(v)}")

    def item(self, value, where, limits):
        if not isinstance(value, dict):
            raise RequestError(422, f"{where} must be an object {{\"question\": ..., \"context\": ...}}, "
                                    f"got {type(value).__name__} ({_short(value)})")
        extra = [k for k in value if k not in ("question", "context")]
        if extra:
            raise RequestError(422, f"{where} has an unknown field {extra[0]!r}; it takes question and context"
                                    f"{did_you_mean(extra[0], ('question', 'context'))}")
        for k in ("question", "context"):
            if k not in value:
                raise RequestError(422, f"{where} lacks {k!r}")
        q = _text(value["question"], f"{where}.question", limits)
        c = _text(value["context"], f"{where}.context", limits)
        return q, c

    def cost(self, item, params, max_length):
        q, c = item
        stride = min(params.get("doc_stride", 128), max_length // 2)
        room = max(1, max_length - len(q) - 3)
        return _windows(len(c), room, min(stride, room - 1)), min(len(q) + len(c) + 3, max_length)

    def call_key(self, params):
        return tuple(sorted({**self._defaults, **params}.items()))

    def warm_up_items(self, max_length, n):
        return [("中" * 4, "中" * (max_length - 7))] * n

    def run(self, served, items, key):
        return served.pipeline(question=[q for q, _ in items], context=[c for _, c in items], **dict(key))


ADAPTERS: dict[str, TaskAdapter] = {a.task: a for a in (ClassificationAdapter(), TokenClassificationAdapter(),
                                                        QuestionAnsweringAdapter())}


def adapter_for(task: str) -> TaskAdapter:
    return ADAPTERS[task]


def split_outputs(outputs: Sequence[Any], counts: Sequence[int]) -> list[list[Any]]:
    """Cut the outputs of a concatenated batch back into each request's share, in order."""
    parts, i = [], 0
    for n in counts:
        parts.append(list(outputs[i:i + n]))
        i += n
    if i != len(outputs):
        raise RuntimeError(f"the pipeline returned {len(outputs)} outputs for {i} inputs")
    return parts
