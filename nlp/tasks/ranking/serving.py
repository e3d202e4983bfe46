"""How the server answers a reranker: `POST /predict` (our usual body) and text-embeddings-
inference's `POST /rerank`, with TEI's body, answer and error shapes:

    POST /predict {"inputs": {"query": "...", "passages": ["...", ...]} | [{...}, ...],
                   "parameters": {"top_k": 3, "return_text": false, "raw_scores": false, "truncate": false}}
                  -> [{"index", "score"[, "text"]}, ...] best first (a list of them for a list of inputs)
    POST /rerank  {"query": "...", "texts": ["...", ...], "raw_scores": false, "return_text": false,
                   "truncate": false, "truncation_direction": "Right"}
                  -> [{"index": 2, "score": 0.97, "text"?: "..."}, ...] sorted by score, best first

`score` is the relevance logit through a sigmoid, or the logit itself with `raw_scores: true`
(TEI's meaning). A text longer than a window is scored by its best window unless `truncate:
true` (first window only; TEI refuses a long text without `truncate`, this server reads it
whole, as /embed does). Each (query, text) pair is one item of the server's batcher, so pairs
of several requests share forward passes, and the windows of a request count toward the
server's limits (--max-inputs applies to `texts`). TEI's errors: `{"error", "error_type"}`.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from nlp._common import did_you_mean
from nlp.tasks.ranking.pipeline import sigmoid
from nlp.tasks.serving import (Limits, Parsed, RequestError, ServingAdapter, as_list, check_text, refuse_tokenless,
                               short, windows)

__all__ = ["RankingPredictAdapter", "RerankAdapter", "pair_cost"]

_RANKED = {"type": "array", "items": {"type": "object", "required": ["index", "score"],
                                      "properties": {"index": {"type": "integer"}, "score": {"type": "number"},
                                                     "text": {"type": "string"}}}}
_RERANK_FIELDS = ("query", "texts", "raw_scores", "return_text", "truncate", "truncation_direction")


def pair_cost(query: str, passage: str, truncate: bool, max_length: int) -> tuple[int, int]:
    """(windows, tokens of the longest window) of one pair: one token per character at most, the
    query cut to half a window at most."""
    q = min(len(query), max(1, (max_length - 3) // 2))
    room = max(8, max_length - q - 3)
    rows = 1 if truncate else windows(len(passage), room, max(1, room // 4))
    return rows, min(q + len(passage) + 3, max_length)


def _bool(payload: Mapping[str, Any], name: str, default: bool) -> bool:
    value = payload.get(name, default)
    value = default if value is None else value
    if not isinstance(value, bool):
        raise RequestError(422, f"`{name}` must be true or false, got {short(value)}")
    return value


class RankingPredictAdapter(ServingAdapter):
    """POST /predict: {"inputs": {"query", "passages"} | [...], "parameters": {...}}."""

    summary = "Rank passages by relevance to a query"
    output_description = "per input, its passages' indices and scores, best first"

    def item(self, value: Any, where: str, limits: Limits) -> Any:
        if not isinstance(value, dict) or set(value) != {"query", "passages"}:
            raise RequestError(422, f"{where} must be an object {{\"query\": ..., \"passages\": [...]}}, "
                                    f"got {short(value)}")
        passages = value["passages"]
        if not isinstance(passages, list) or not passages:
            raise RequestError(422, f"{where}.passages must be a non-empty list of strings, got {short(passages)}")
        if len(passages) > limits.max_inputs:
            raise RequestError(413, f"{where}.passages has {len(passages)} passages; this server takes at most "
                                    f"{limits.max_inputs} (--max-inputs). Split the request.")
        return (check_text(value["query"], f"{where}.query", limits),
                [check_text(p, f"{where}.passages[{i}]", limits) for i, p in enumerate(passages)])

    def check_tokens(self, items: list[Any], wheres: list[str], served: Any) -> None:
        refuse_tokenless(served, [q for q, _ in items], [f"{w}.query" for w in wheres])
        for (_, passages), w in zip(items, wheres):
            refuse_tokenless(served, passages, [f"{w}.passages[{i}]" for i in range(len(passages))])

    def cost(self, item: Any, params: dict[str, Any], max_length: int) -> tuple[int, int]:
        q, passages = item
        costs = [pair_cost(q, p, bool(params.get("truncate", False)), max_length) for p in passages]
        return sum(r for r, _ in costs), max(t for _, t in costs)

    def warm_up_items(self, max_length: int, n: int) -> list[Any]:
        half = max(1, (max_length - 3) // 2)
        return [("中" * half, ["中" * half])] * n

    def run(self, served: Any, items: list[Any], key: tuple) -> list[Any]:
        return served.pipeline([q for q, _ in items], [p for _, p in items], **dict(key))

    def input_schema(self) -> dict[str, Any]:
        one = {"type": "object", "required": ["query", "passages"], "additionalProperties": False,
               "properties": {"query": {"type": "string"},
                              "passages": {"type": "array", "items": {"type": "string"}, "minItems": 1}}}
        return {"oneOf": [one, {"type": "array", "items": one}]}

    def response_schema(self) -> dict[str, Any]:
        return {"oneOf": [_RANKED, {"type": "array", "items": _RANKED}]}


class RerankAdapter(ServingAdapter):
    """TEI's POST /rerank: one query, its texts, the texts' scores sorted best first."""

    summary = "Rerank texts by relevance to a query (text-embeddings-inference's /rerank)"
    output_description = "[{index, score, text?}] sorted by score, best first"
    body_fields = _RERANK_FIELDS

    def parse_body(self, payload: Mapping[str, Any], served: Any, limits: Limits) -> Parsed:
        extra = [k for k in payload if k not in _RERANK_FIELDS]
        if extra:
            raise RequestError(422, f"unknown field {extra[0]!r}; /rerank takes {', '.join(_RERANK_FIELDS)}"
                                    f"{did_you_mean(extra[0], _RERANK_FIELDS)}")
        if "query" not in payload:
            raise RequestError(422, "the body lacks \"query\"")
        if "texts" not in payload:
            raise RequestError(422, "the body lacks \"texts\"")
        query = check_text(payload["query"], "query", limits)
        if not isinstance(payload["texts"], list):
            raise RequestError(422, f"`texts` must be a list of strings, got {short(payload['texts'])}")
        texts, _ = as_list(payload["texts"], "texts", limits)
        texts = [check_text(t, f"texts[{i}]", limits) for i, t in enumerate(texts)]
        params = {name: _bool(payload, name, False) for name in ("raw_scores", "return_text", "truncate")}
        direction = payload.get("truncation_direction", "Right")
        if direction not in (None, "Right", "right"):
            raise RequestError(422, f"`truncation_direction` must be \"Right\" (a window keeps a text's start), "
                                    f"got {short(direction)}")
        refuse_tokenless(served, [query], ["query"])
        refuse_tokenless(served, texts, [f"texts[{i}]" for i in range(len(texts))])
        costs = [pair_cost(query, t, params["truncate"], served.max_length) for t in texts]
        return Parsed([(query, t) for t in texts], False, params, (("truncate", params["truncate"]),),
                      rows=sum(r for r, _ in costs), row_tokens=max(t for _, t in costs))

    def warm_up_items(self, max_length: int, n: int) -> list[Any]:
        half = max(1, (max_length - 3) // 2)
        return [("中" * half, "中" * half)] * n

    def run(self, served: Any, items: list[Any], key: tuple) -> list[Any]:
        return served.pipeline.score_pairs(items, **dict(key))

    def respond(self, shaped: list[Any], parsed: Parsed) -> Any:
        raw = np.asarray(shaped, dtype=np.float64)
        scores = raw if parsed.params["raw_scores"] else sigmoid(raw)
        order = np.argsort(-raw, kind="stable")
        texts = [t for _, t in parsed.items]
        return [{"index": int(i), "score": float(scores[i]),
                 **({"text": texts[i]} if parsed.params["return_text"] else {})} for i in order]

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        return {"error": message, "error_type": "Validation" if status in (400, 413, 422) else "Overloaded"}

    def request_schema(self) -> dict[str, Any]:
        return {"type": "object", "required": ["query", "texts"], "additionalProperties": False,
                "properties": {"query": {"type": "string"},
                               "texts": {"type": "array", "items": {"type": "string"}, "minItems": 1},
                               "raw_scores": {"type": "boolean", "default": False},
                               "return_text": {"type": "boolean", "default": False},
                               "truncate": {"type": "boolean", "default": False},
                               "truncation_direction": {"enum": ["Right"], "default": "Right"}}}

    def response_schema(self) -> dict[str, Any]:
        return _RANKED
