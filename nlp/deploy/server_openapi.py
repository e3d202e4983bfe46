"""The OpenAPI 3.1 document of the model server (GET /openapi.json), written by hand."""

from __future__ import annotations

from typing import Any

from nlp.deploy.server_tasks import ADAPTERS

__all__ = ["openapi_document"]

_ERROR = {"type": "object", "required": ["error", "message"],
          "properties": {"error": {"type": "string", "description": "short name of the status"},
                         "message": {"type": "string", "description": "what was wrong and what to do"}}}
_TEXTS = {"oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]}
_QA_INPUT = {"type": "object", "required": ["question", "context"], "additionalProperties": False,
             "properties": {"question": {"type": "string"}, "context": {"type": "string"}}}
_INPUTS = {
    "text-classification": _TEXTS,
    "token-classification": _TEXTS,
    "question-answering": {"oneOf": [_QA_INPUT, {"type": "array", "items": _QA_INPUT}]},
}
_LABEL = {"type": "object", "properties": {"label": {"type": "string"}, "score": {"type": "number"}}}
_ENTITY = {"type": "object", "properties": {
    "entity_group": {"type": "string"}, "word": {"type": "string"},
    "start": {"type": "integer", "description": "character offset into the text sent"},
    "end": {"type": "integer", "description": "exclusive"}, "score": {"type": "number"}}}
_ANSWER = {"type": "object", "properties": {
    "answer": {"type": "string"}, "score": {"type": "number"},
    "start": {"type": "integer", "description": "character offset into the context"},
    "end": {"type": "integer", "description": "exclusive"}}}
_OUTPUTS = {
    "text-classification": ("the top_k labels, best first, per text (a list of them for a list of texts)",
                            {"type": "array", "items": {"oneOf": [_LABEL, {"type": "array", "items": _LABEL}]}}),
    "token-classification": ("the entities of the text (a list of them for a list of texts)",
                             {"type": "array", "items": {"oneOf": [_ENTITY, {"type": "array", "items": _ENTITY}]}}),
    "question-answering": ("the answer (a list for a list of questions, or for top_k > 1)",
                           {"oneOf": [_ANSWER, {"type": "array"}]}),
}


def _error(description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}


def openapi_document(task: str, *, version: str, auth: bool) -> dict[str, Any]:
    adapter = ADAPTERS[task]
    out_doc, out_schema = _OUTPUTS[task]
    params = {name: {"description": doc} for name, doc in adapter.parameters.items()}
    request = {"type": "object", "required": ["inputs"], "additionalProperties": False,
               "properties": {"inputs": _INPUTS[task],
                              "parameters": {"type": "object", "additionalProperties": False, "properties": params}}}
    predict_responses = {
        "200": {"description": out_doc, "content": {"application/json": {"schema": out_schema}}},
        "413": _error("too many inputs (--max-inputs) or too long a text (--max-text-chars)"),
        "422": _error("malformed JSON, wrong types, unknown parameters"),
        "429": _error("the queue is full (--max-queue); retry after the Retry-After header's seconds"),
        "503": _error("the model is still loading, or the server is shutting down"),
    }
    if auth:
        predict_responses["401"] = _error("missing or wrong bearer token")
    doc: dict[str, Any] = {
        "openapi": "3.1.0",
        "info": {"title": f"nlp serve: {task}", "version": version},
        "paths": {
            "/predict": {"post": {
                "summary": f"Run the {task} model",
                "requestBody": {"required": True, "content": {"application/json": {"schema": request}}},
                "responses": predict_responses}},
            "/health": {"get": {"summary": "200 once the model is loaded, 503 before",
                                "responses": {"200": {"description": "ready"}, "503": _error("loading")}}},
            "/info": {"get": {"summary": "task, labels, model, backend, precision, version",
                              "responses": {"200": {"description": "what is served"}}}},
            "/metrics": {"get": {"summary": "Prometheus text format",
                                 "responses": {"200": {"description": "metrics",
                                                       "content": {"text/plain": {"schema": {"type": "string"}}}}}}},
        },
        "components": {"schemas": {"Error": _ERROR}},
    }
    if auth:
        doc["components"]["securitySchemes"] = {"bearer": {"type": "http", "scheme": "bearer"}}
        for path in ("/predict", "/info", "/metrics"):
            for op in doc["paths"][path].values():
                op["security"] = [{"bearer": []}]
    return doc
