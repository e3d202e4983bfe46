"""OpenAI's `POST /v1/embeddings` for an embedding model, in OpenAI's request, answer and error
shapes, so that OpenAI's clients (and the RAG tools built on them) can point their base URL at
`nlp serve` (nlp/tasks/serving.py says how a route is served):

    {"model": "name", "input": "text" | ["text", ...] | [id, ...] | [[id, ...], ...],
     "encoding_format": "float" | "base64", "dimensions": 128, "user": "..."}
    -> {"object": "list", "model": "name",
        "data": [{"object": "embedding", "index": 0, "embedding": [float, ...] | "base64"}, ...],
        "usage": {"prompt_tokens": n, "total_tokens": n}}

- The vectors are the model's L2-normalised sentence vectors (as /embed answers). `dimensions`
  keeps the first that many components and L2-normalises them again, as OpenAI's models that
  take it do; more than the model's width is refused.
- `base64` is the vector's little-endian float32 bytes, base64-encoded: what OpenAI's Python
  client asks for by default and decodes.
- Token ids are ids of the served model's vocabulary (OpenAI's own ids mean nothing to it); they
  are decoded to text (special tokens dropped) and that text is embedded.
- `model` is echoed back: the server serves one model whatever name the client gives.
- `usage` counts the model's tokens of each input, special tokens included.
- Errors: `{"error": {"message", "type", "param", "code"}}`, OpenAI's shape.
"""

from __future__ import annotations

import base64
from typing import Any, Mapping

import numpy as np

from nlp.tasks.embedding.serving import encode_texts, text_cost
from nlp.tasks.serving import Limits, Parsed, RequestError, ServingAdapter, check_text, refuse_tokenless, short

__all__ = ["OpenAIEmbeddingsAdapter"]

_FIELDS = ("model", "input", "encoding_format", "dimensions", "user")
_ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 404: "invalid_request_error",
                408: "timeout", 413: "invalid_request_error", 422: "invalid_request_error",
                429: "rate_limit_error", 503: "server_error"}


def _cost(text: str, max_length: int) -> tuple[int, int]:
    return text_cost(text, False, max_length)


def _is_ids(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(i, int) and not isinstance(i, bool)
                                                            for i in value)


class OpenAIEmbeddingsAdapter(ServingAdapter):
    """POST /v1/embeddings, OpenAI's embeddings API."""

    summary = "Sentence vectors in OpenAI's embeddings API shape (POST /v1/embeddings)"
    output_description = "{object: list, data: [{object: embedding, index, embedding}], model, usage}"
    body_fields = _FIELDS

    def parse_body(self, payload: Mapping[str, Any], served: Any, limits: Limits) -> Parsed:
        extra = [k for k in payload if k not in _FIELDS]
        if extra:
            raise RequestError(422, f"unknown field {extra[0]!r}; /v1/embeddings takes {', '.join(_FIELDS)}")
        model = payload.get("model")
        if not isinstance(model, str) or not model:
            raise RequestError(422, f"`model` must be a non-empty string (any name: this server serves one "
                                    f"model), got {short(model)}")
        fmt = payload.get("encoding_format", "float")
        fmt = "float" if fmt is None else fmt
        if fmt not in ("float", "base64"):
            raise RequestError(422, f"`encoding_format` must be \"float\" or \"base64\", got {short(fmt)}")
        width = served.pipeline.config.hidden_size
        dims = payload.get("dimensions")
        if dims is not None and (isinstance(dims, bool) or not isinstance(dims, int) or not 1 <= dims <= width):
            raise RequestError(422, f"`dimensions` must be an integer in [1, {width}] (the model's vectors have "
                                    f"{width}), got {short(dims)}")
        if "input" not in payload:
            raise RequestError(422, "the body lacks \"input\"")
        texts, single = self._texts(payload["input"], served, limits)
        wheres = ["input" if single else f"input[{i}]" for i in range(len(texts))]
        refuse_tokenless(served, texts, wheres)
        costs = [_cost(t, served.max_length) for t in texts]
        return Parsed(texts, single, {"model": model, "encoding_format": fmt, "dimensions": dims}, (),
                      rows=sum(r for r, _ in costs), row_tokens=max(t for _, t in costs))

    def _texts(self, raw: Any, served: Any, limits: Limits) -> tuple[list[str], bool]:
        """The texts of `input`: a text, texts, one sequence of token ids, or several."""
        if isinstance(raw, str):
            return [check_text(raw, "input", limits)], True
        if _is_ids(raw):
            return [self._decoded(raw, "input", served, limits)], True
        if not isinstance(raw, list) or not raw:
            raise RequestError(422, "`input` must be a text, a non-empty list of texts, a list of token ids or a "
                                    f"list of such lists, got {short(raw)}")
        if len(raw) > limits.max_inputs:
            raise RequestError(413, f"{len(raw)} inputs in one request; this server takes at most "
                                    f"{limits.max_inputs} (--max-inputs). Split the request.")
        out = []
        for i, x in enumerate(raw):
            where = f"input[{i}]"
            if isinstance(x, list):
                if not _is_ids(x):
                    raise RequestError(422, f"{where} must be a non-empty list of token ids, got {short(x)}")
                out.append(self._decoded(x, where, served, limits))
            else:
                out.append(check_text(x, where, limits))
        return out, False

    def _decoded(self, ids: list[int], where: str, served: Any, limits: Limits) -> str:
        tokenizer = served.pipeline.tokenizer
        vocab = len(tokenizer)
        if len(ids) > limits.max_text_chars:
            raise RequestError(413, f"{where} has {len(ids)} token ids; this server takes at most "
                                    f"{limits.max_text_chars} (--max-text-chars)")
        bad = next((k for k, i in enumerate(ids) if not 0 <= i < vocab), None)
        if bad is not None:
            raise RequestError(422, f"{where}[{bad}] = {ids[bad]} is not a token id of this model (its vocabulary "
                                    f"has ids 0 to {vocab - 1}); send text, or ids from this model's tokenizer "
                                    "(POST /tokenize)")
        text = tokenizer.decode(ids, skip_special_tokens=True)
        if not text.strip():
            raise RequestError(422, f"{where} decodes to no text (only special tokens or blanks); send ids of "
                                    "some content")
        return text

    def run(self, served: Any, items: list[Any], key: tuple) -> list[Any]:
        vectors, _ = encode_texts(served, items)
        counts = [len(ids) for ids in served.pipeline.tokenizer(list(items))["input_ids"]]
        return list(zip(vectors, counts))

    def shape(self, output: Any, params: dict[str, Any]) -> Any:
        vector, tokens = output
        vector = np.asarray(vector, dtype=np.float32)
        if params["dimensions"] is not None:
            vector = vector[:params["dimensions"]]
            vector = vector / max(float(np.linalg.norm(vector)), 1e-12)
        if params["encoding_format"] == "base64":
            embedding: Any = base64.b64encode(vector.astype("<f4").tobytes()).decode("ascii")
        else:
            embedding = vector.tolist()
        return embedding, tokens

    def respond(self, shaped: list[Any], parsed: Parsed) -> Any:
        tokens = sum(t for _, t in shaped)
        return {"object": "list", "model": parsed.params["model"],
                "data": [{"object": "embedding", "index": i, "embedding": e} for i, (e, _) in enumerate(shaped)],
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        return {"error": {"message": message, "type": _ERROR_TYPES.get(status, "server_error"),
                          "param": None, "code": None}}

    error_schema = {"type": "object", "required": ["error"],
                    "properties": {"error": {"type": "object", "required": ["message", "type"],
                                             "properties": {"message": {"type": "string"},
                                                            "type": {"type": "string"},
                                                            "param": {"type": ["string", "null"]},
                                                            "code": {"type": ["string", "null"]}}}}}

    def request_schema(self) -> dict[str, Any]:
        ids = {"type": "array", "items": {"type": "integer", "minimum": 0}}
        return {"type": "object", "required": ["model", "input"], "additionalProperties": False,
                "properties": {"model": {"type": "string"},
                               "input": {"oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}},
                                                   ids, {"type": "array", "items": ids}]},
                               "encoding_format": {"enum": ["float", "base64"], "default": "float"},
                               "dimensions": {"type": "integer", "minimum": 1},
                               "user": {"type": "string"}}}

    def response_schema(self) -> dict[str, Any]:
        item = {"type": "object", "required": ["object", "index", "embedding"],
                "properties": {"object": {"const": "embedding"}, "index": {"type": "integer"},
                               "embedding": {"oneOf": [{"type": "array", "items": {"type": "number"}},
                                                       {"type": "string", "contentEncoding": "base64"}]}}}
        return {"type": "object", "required": ["object", "data", "model", "usage"],
                "properties": {"object": {"const": "list"}, "data": {"type": "array", "items": item},
                               "model": {"type": "string"},
                               "usage": {"type": "object", "properties": {"prompt_tokens": {"type": "integer"},
                                                                          "total_tokens": {"type": "integer"}}}}}
