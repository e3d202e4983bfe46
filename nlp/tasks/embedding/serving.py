"""How the server answers an embedding model: `POST /predict` (vectors, our usual body) and
text-embeddings-inference's routes, with TEI's bodies and error shape:

    POST /embed       {"inputs": "text" | ["text", ...], "normalize": true, "truncate": false,
                       "prompt_name": "query"}
                      -> [[float, ...], ...]   (one vector per input, always a list of them;
                                                `prompt_name`: one of the prompts the model
                                                declares, put before each text; absent: its
                                                default prompt, if any: prompts.py)
    POST /similarity  {"inputs": {"source_sentence": "text", "sentences": ["text", ...]}}
                      -> [float, ...]          (the cosine of the source with each sentence;
                                                cosine + lexical score for a model with lexical weights)
    POST /embed_sparse {"inputs": "text" | ["text", ...], "truncate": false}
                      -> [[{"index": key, "value": weight}, ...], ...]   (a model with lexical
                                                weights: each text's sparse vector, keys ascending:
                                                token ids, and bigram keys for a model with them)

Errors on these routes are TEI's `{"error": message, "error_type": ...}` ("Validation" for
413 / 422, "Overloaded" for 429 / 503). One difference from TEI, on purpose: `truncate: false`
embeds a long text whole (its windows, pooled) instead of refusing it. `truncate: true` is costed
as one window a text, and only the prefix of a text that its first window keeps is tokenized
(`Pipeline.kept_prefixes`), so that the cost is what is processed.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from nlp.tasks.serving import (Limits, Parsed, RequestError, ServingAdapter, as_list, check_text, refuse_tokenless,
                               short, windows)

__all__ = ["EmbeddingPredictAdapter", "EmbedAdapter", "EmbedSparseAdapter", "InferenceRootAdapter",
           "SimilarityAdapter", "encode_texts", "text_cost"]

_VECTOR = {"type": "array", "items": {"type": "number"}}
_TEXTS = {"oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]}


def text_cost(text: str, truncate: bool, max_length: int) -> tuple[int, int]:
    """(windows, tokens of the longest window): one token per character at most."""
    tokens = len(text) + 2
    room = max_length - 2
    rows = 1 if truncate else windows(tokens - 2, room, max(1, room // 4))
    return rows, min(tokens, max_length)


def encode_texts(served: Any, texts: list[str], *, normalize: bool = True,
                 truncate: bool = False, prompt_name: str | None = None) -> tuple[np.ndarray, Any]:
    """(vectors, sparse vectors or None) of `texts`, in one pass of the served model (a
    FeatureExtractionPipeline, or its similarity subclass), the model's prompt `prompt_name`
    (None: its default) before each."""
    from nlp.tasks.embedding.pipeline import FeatureExtractionPipeline

    prompt = served.pipeline.prompts.text(prompt_name)
    return FeatureExtractionPipeline._encode(served.pipeline, texts, False, truncate=truncate, stride=None,
                                             normalize=normalize, prompt=prompt)


def _prompt_name(payload: Mapping[str, Any], served: Any) -> str | None:
    """The body's `prompt_name`, checked against the model's prompts (422 naming them)."""
    from nlp._common import ConfigError

    name = payload.get("prompt_name")
    if name is not None and not isinstance(name, str):
        raise RequestError(422, f"`prompt_name` must be a string, got {short(name)}")
    try:
        served.pipeline.prompts.text(name)
    except ConfigError as err:
        raise RequestError(422, str(err)) from None
    return name


def _bool(payload: Mapping[str, Any], name: str, default: bool) -> bool:
    value = payload.get(name, default)
    if not isinstance(value, bool):
        raise RequestError(422, f"`{name}` must be true or false, got {short(value)}")
    return value


class _TeiErrors(ServingAdapter):
    def error_body(self, status: int, message: str) -> dict[str, Any]:
        return {"error": message, "error_type": "Validation" if status in (400, 413, 422) else "Overloaded"}


class EmbeddingPredictAdapter(ServingAdapter):
    """POST /predict: {"inputs": text | [text], "parameters": {"normalize": bool}} -> vectors."""

    summary = "Sentence vectors"
    parameters = {"normalize": "L2-normalise the vectors (default true)",
                  "prompt_name": "one of the model's prompts (config.json `prompts`) to put before each text"}
    output_description = "one vector (a list of floats) per text"

    def check_params(self, params: dict[str, Any], served: Any) -> None:
        _bool(params, "normalize", True)
        _prompt_name(params, served)

    def cost(self, item: Any, params: dict[str, Any], max_length: int) -> tuple[int, int]:
        return text_cost(item, False, max_length)

    def call_key(self, params: dict[str, Any]) -> tuple:
        return (("normalize", params.get("normalize", True)), ("prompt_name", params.get("prompt_name")))

    def run(self, served: Any, items: list[Any], key: tuple) -> list[Any]:
        return list(encode_texts(served, items, **dict(key))[0])

    def shape(self, output: Any, params: dict[str, Any]) -> Any:
        return np.asarray(output, dtype=np.float32).tolist()

    def response_schema(self) -> dict[str, Any]:
        return {"oneOf": [_VECTOR, {"type": "array", "items": _VECTOR}]}


class EmbedAdapter(_TeiErrors, EmbeddingPredictAdapter):
    """TEI's POST /embed: /predict's vectors with TEI's body, answer and error shapes."""

    summary = "Sentence vectors (text-embeddings-inference's /embed)"
    output_description = "one vector per input, always a list of vectors"
    body_fields = ("inputs", "normalize", "truncate", "prompt_name", "truncation_direction")

    def parse_body(self, payload: Mapping[str, Any], served: Any, limits: Limits) -> Parsed:
        extra = [k for k in payload if k not in self.body_fields]
        if extra:
            raise RequestError(422, f"unknown field {extra[0]!r}; /embed takes inputs, normalize, truncate, "
                               "prompt_name and truncation_direction")
        if "inputs" not in payload:
            raise RequestError(422, "the body lacks \"inputs\"")
        normalize, truncate = _bool(payload, "normalize", True), _bool(payload, "truncate", False)
        direction = payload.get("truncation_direction", "right")
        if not isinstance(direction, str) or direction.lower() != "right":
            # a truncated text keeps its first window (the pipeline's windows start at the text's start)
            raise RequestError(422, f"`truncation_direction` must be \"right\" (a truncated text keeps its start), "
                                    f"got {short(direction)}")
        prompt_name = _prompt_name(payload, served)
        raw, single = as_list(payload["inputs"], "inputs", limits)
        wheres = ["inputs" if single else f"inputs[{i}]" for i in range(len(raw))]
        items = [check_text(x, where, limits) for x, where in zip(raw, wheres)]
        refuse_tokenless(served, items, wheres)
        costs = [text_cost(t, truncate, served.max_length) for t in items]
        return Parsed(items, single, {}, (("normalize", normalize), ("truncate", truncate),
                                          ("prompt_name", prompt_name)),
                      rows=sum(r for r, _ in costs), row_tokens=max(t for _, t in costs))

    def respond(self, shaped: list[Any], parsed: Parsed) -> Any:
        return shaped  # TEI answers a list of vectors, also for one text

    def request_schema(self) -> dict[str, Any]:
        return {"type": "object", "required": ["inputs"], "additionalProperties": False,
                "properties": {"inputs": _TEXTS, "normalize": {"type": "boolean", "default": True},
                               "truncate": {"type": "boolean", "default": False},
                               "prompt_name": {"type": "string"},
                               "truncation_direction": {"enum": ["right", "Right"], "default": "right"}}}

    def response_schema(self) -> dict[str, Any]:
        return {"type": "array", "items": _VECTOR}


class SimilarityAdapter(_TeiErrors):
    """TEI's POST /similarity."""

    summary = "Cosine similarity of a source sentence with each of several sentences (TEI's /similarity)"
    output_description = "one similarity per sentence, in order"
    body_fields = ("inputs",)

    def parse_body(self, payload: Mapping[str, Any], served: Any, limits: Limits) -> Parsed:
        extra = [k for k in payload if k not in self.body_fields]
        if extra:
            raise RequestError(422, f"unknown field {extra[0]!r}; /similarity takes inputs")
        inputs = payload.get("inputs")
        if not isinstance(inputs, dict) or set(inputs) - {"source_sentence", "sentences"} \
                or "source_sentence" not in inputs or "sentences" not in inputs:
            raise RequestError(422, "\"inputs\" must be an object {\"source_sentence\": text, \"sentences\": "
                                    f"[text, ...]}}, got {short(inputs)}")
        source = check_text(inputs["source_sentence"], "inputs.source_sentence", limits)
        if not isinstance(inputs["sentences"], list):
            raise RequestError(422, f"inputs.sentences must be a list of texts, got {short(inputs['sentences'])}")
        sentences, _ = as_list(inputs["sentences"], "inputs.sentences", limits)
        sentences = [check_text(s, f"inputs.sentences[{i}]", limits) for i, s in enumerate(sentences)]
        refuse_tokenless(served, [source, *sentences],
                         ["inputs.source_sentence", *(f"inputs.sentences[{i}]" for i in range(len(sentences)))])
        costs = [text_cost(t, False, served.max_length) for t in (source, *sentences)]
        return Parsed([(source, sentences)], True, {}, (), rows=sum(r for r, _ in costs),
                      row_tokens=max(t for _, t in costs))

    def run(self, served: Any, items: list[Any], key: tuple) -> list[Any]:
        from nlp.tasks.embedding.metrics import lexical_pair_scores

        texts = [t for source, sentences in items for t in (source, *sentences)]
        vectors, sparse = encode_texts(served, texts)  # normalised: a dot product is the cosine
        out, i = [], 0
        for _, sentences in items:
            n = len(sentences)
            scores = vectors[i + 1:i + 1 + n] @ vectors[i]
            if sparse is not None:  # the hybrid score the model was trained on
                scores = scores + lexical_pair_scores([sparse[i]] * n, sparse[i + 1:i + 1 + n])
            out.append(scores.astype(float).tolist())
            i += 1 + n
        return out

    def warm_up_items(self, max_length: int, n: int) -> list[Any]:
        return [("中" * (max_length - 2), ["中" * (max_length - 2)])] * max(1, n // 2)

    def request_schema(self) -> dict[str, Any]:
        item = {"type": "object", "required": ["source_sentence", "sentences"], "additionalProperties": False,
                "properties": {"source_sentence": {"type": "string"},
                               "sentences": {"type": "array", "items": {"type": "string"}}}}
        return {"type": "object", "required": ["inputs"], "additionalProperties": False,
                "properties": {"inputs": item}}

    def response_schema(self) -> dict[str, Any]:
        return {"type": "array", "items": {"type": "number"}}


class EmbedSparseAdapter(_TeiErrors):
    """TEI's POST /embed_sparse, for a model with lexical weights: each text's sparse vector as
    [{"index": key, "value": weight}, ...], keys ascending (token ids, and bigram keys for a model
    with them; keys of weight 0 left out)."""

    summary = "Sparse lexical vectors (text-embeddings-inference's /embed_sparse; a model with lexical weights)"
    output_description = "one list of {index, value} per input, always a list of them"
    body_fields = ("inputs", "truncate")

    def parse_body(self, payload: Mapping[str, Any], served: Any, limits: Limits) -> Parsed:
        if not served.pipeline.has_lexical_weights:
            raise RequestError(422, "this model has no lexical weights (config.json lexical_weights), so it has no "
                                    "sparse vectors; use /embed, or serve a model fine-tuned with "
                                    "model.config.lexical_weights=true")
        extra = [k for k in payload if k not in self.body_fields]
        if extra:
            raise RequestError(422, f"unknown field {extra[0]!r}; /embed_sparse takes inputs and truncate")
        if "inputs" not in payload:
            raise RequestError(422, "the body lacks \"inputs\"")
        truncate = _bool(payload, "truncate", False)
        raw, single = as_list(payload["inputs"], "inputs", limits)
        wheres = ["inputs" if single else f"inputs[{i}]" for i in range(len(raw))]
        items = [check_text(x, where, limits) for x, where in zip(raw, wheres)]
        refuse_tokenless(served, items, wheres)
        costs = [text_cost(t, truncate, served.max_length) for t in items]
        return Parsed(items, single, {}, (("truncate", truncate),),
                      rows=sum(r for r, _ in costs), row_tokens=max(t for _, t in costs))

    def run(self, served: Any, items: list[Any], key: tuple) -> list[Any]:
        _, sparse = encode_texts(served, items, **dict(key))
        return [[{"index": int(i), "value": float(w)} for i, w in zip(ids, weights)] for ids, weights in sparse]

    def respond(self, shaped: list[Any], parsed: Parsed) -> Any:
        return shaped  # a list of sparse vectors, also for one text

    def request_schema(self) -> dict[str, Any]:
        return {"type": "object", "required": ["inputs"], "additionalProperties": False,
                "properties": {"inputs": _TEXTS, "truncate": {"type": "boolean", "default": False}}}

    def response_schema(self) -> dict[str, Any]:
        entry = {"type": "object", "required": ["index", "value"],
                 "properties": {"index": {"type": "integer"}, "value": {"type": "number"}}}
        return {"type": "array", "items": {"type": "array", "items": entry}}


class InferenceRootAdapter(_TeiErrors):
    """POST /: what huggingface_hub's `InferenceClient` sends to an endpoint URL (a TEI server or an
    inference endpoint) for `feature_extraction` (/embed's body: vectors, a list of them) and
    `sentence_similarity` (/similarity's body, `inputs` an object: one score per sentence)."""

    summary = ("Vectors (/embed's body) or similarities (/similarity's body, inputs {source_sentence, sentences}): "
               "the endpoint root huggingface_hub's InferenceClient posts to")
    output_description = "/embed's answer, or /similarity's for inputs {source_sentence, sentences}"
    body_fields = EmbedAdapter.body_fields

    def __init__(self) -> None:
        self.embed, self.similarity = EmbedAdapter(), SimilarityAdapter()

    def parse_body(self, payload: Mapping[str, Any], served: Any, limits: Limits) -> Parsed:
        if isinstance(payload.get("inputs"), dict):  # {"source_sentence", "sentences"}: sentence_similarity
            # the client sends `"parameters": {}` with it: nothing to read there
            params = payload.get("parameters", {})
            if params not in ({}, None):
                raise RequestError(422, f"sentence similarity takes no parameters, got {short(params)}")
            parsed = self.similarity.parse_body({"inputs": payload["inputs"]}, served, limits)
            parsed.key = (("similarity", True),)
            return parsed
        return self.embed.parse_body(payload, served, limits)

    def run(self, served: Any, items: list[Any], key: tuple) -> list[Any]:
        if dict(key).get("similarity"):
            return self.similarity.run(served, items, ())
        return self.embed.run(served, items, key)

    def shape(self, output: Any, params: dict[str, Any]) -> Any:
        return output if isinstance(output, list) else self.embed.shape(output, params)  # scores, or a vector

    def respond(self, shaped: list[Any], parsed: Parsed) -> Any:
        return shaped[0] if dict(parsed.key).get("similarity") else shaped

    def request_schema(self) -> dict[str, Any]:
        schema = self.embed.request_schema()
        pair = self.similarity.request_schema()["properties"]["inputs"]
        return {**schema, "properties": {**schema["properties"], "inputs": {"oneOf": [*_TEXTS["oneOf"], pair]},
                                         "parameters": {"type": "object", "maxProperties": 0}}}

    def response_schema(self) -> dict[str, Any]:
        return {"oneOf": [self.embed.response_schema(), self.similarity.response_schema()]}
