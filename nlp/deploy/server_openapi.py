"""The OpenAPI 3.1 document of the model server (GET /openapi.json), from the task's routes."""

from __future__ import annotations

from typing import Any

from nlp.deploy.server_tasks import routes_for

__all__ = ["openapi_document"]

_ERROR = {"type": "object", "required": ["error", "message"],
          "properties": {"error": {"type": "string", "description": "short name of the status"},
                         "message": {"type": "string", "description": "what was wrong and what to do"}}}


def _error_ref(description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}


def openapi_document(task: str, *, version: str, auth: bool) -> dict[str, Any]:
    routes = routes_for(task)
    paths: dict[str, Any] = {}
    for path, adapter in routes.items():
        own = getattr(adapter, "error_schema", None)  # a route answering its clients' error shape

        def _error(description: str, own: Any = own) -> dict[str, Any]:
            return _error_ref(description) if own is None else \
                {"description": description, "content": {"application/json": {"schema": own}}}

        responses = {
            "200": {"description": adapter.output_description,
                    "content": {"application/json": {"schema": adapter.response_schema()}}},
            "413": _error("too many inputs (--max-inputs), too long a text (--max-text-chars), too many windows "
                          "(--max-request-windows) or too large a body"),
            "422": _error("malformed JSON, wrong types, unknown parameters"),
            "429": _error("the queue is full (--max-queue); retry after the Retry-After header's seconds"),
            "503": _error("the model is still loading, or the server is shutting down"),
        }
        if auth:
            responses["401"] = _error("missing or wrong bearer token")
        paths[path] = {"post": {
            "summary": adapter.summary or f"Run the {task} model",
            "requestBody": {"required": True, "content": {"application/json": {"schema": adapter.request_schema()}}},
            "responses": responses}}
    paths.update({
        "/health": {"get": {"summary": "200 once the model is loaded, 503 before",
                            "responses": {"200": {"description": "ready"}, "503": _error_ref("loading")}}},
        "/info": {"get": {"summary": "task, labels, model, backend, precision, version",
                          "responses": {"200": {"description": "what is served"}}}},
        "/metrics": {"get": {"summary": "Prometheus text format",
                             "responses": {"200": {"description": "metrics",
                                                   "content": {"text/plain": {"schema": {"type": "string"}}}}}}},
    })
    doc: dict[str, Any] = {
        "openapi": "3.1.0",
        "info": {"title": f"nlp serve: {task}", "version": version},
        "paths": paths,
        "components": {"schemas": {"Error": _ERROR}},
    }
    if auth:
        doc["components"]["securitySchemes"] = {"bearer": {"type": "http", "scheme": "bearer"}}
        for path in (*routes, "/info", "/metrics"):
            for op in doc["paths"][path].values():
                op["security"] = [{"bearer": []}]
    return doc
