"""How `POST /predict` takes and answers extractive QA (nlp/tasks/serving.py):

    "inputs": {"question", "context"} | [...]  ->  {"answer", "score", "start", "end"} (transformers' shape)
"""

from __future__ import annotations

from typing import Any

from nlp.tasks.serving import FieldsAdapter, RequestError, int_param, short, windows

__all__ = ["QA_MAX_TOP_K", "QuestionAnsweringAdapter", "qa_parameter_limits"]

# The QA parameters that multiply work or memory, bounded (422 past them). The span search
# looks at n_best = max(20, top_k) starts x n_best ends in every window, so a top_k of 20 costs
# nothing over the default; an answer longer than a window cannot be found, so
# max_answer_length stops at the window (max_length); doc_stride is capped at half a window by
# the pipeline, so at most twice the windows, which the cost counts.
QA_MAX_TOP_K = 20


def qa_parameter_limits(max_length: int) -> dict[str, tuple[int, str]]:
    """{parameter: (largest value, why)} for a QA server whose windows are `max_length` tokens."""
    return {"top_k": (QA_MAX_TOP_K, " (the span search's n-best width)"),
            "max_answer_length": (max_length, " (tokens in one window of this model)"),
            "doc_stride": (max_length, " (tokens in one window of this model)")}

_ANSWER = {"type": "object", "properties": {
    "answer": {"type": "string"}, "score": {"type": "number"},
    "start": {"type": "integer", "description": "character offset into the context"},
    "end": {"type": "integer", "description": "exclusive"}}}


class QuestionAnsweringAdapter(FieldsAdapter):
    fields = ("question", "context")
    parameters = {
        "top_k": "answers per question (default 1; more than 1 returns a list per question)",
        "max_answer_length": "longest answer in tokens (default 30)",
        "handle_impossible_answer": "answer \"\" when no span beats [CLS] (default false)",
        "doc_stride": "tokens shared by consecutive windows of a long context (default 128)",
    }
    output_description = "the answer (a list for a list of questions, or for top_k > 1)"
    _defaults = {"top_k": 1, "max_answer_length": 30, "handle_impossible_answer": False, "doc_stride": 128}

    def check_params(self, params: dict[str, Any], served: Any) -> None:
        for name, (maximum, why) in qa_parameter_limits(served.max_length).items():
            int_param(params, name, minimum=1, maximum=maximum, why=why)
        v = params.get("handle_impossible_answer", False)
        if not isinstance(v, bool):
            raise RequestError(422, f"parameters.handle_impossible_answer must be true or false, got {short(v)}")

    def cost(self, item: Any, params: dict[str, Any], max_length: int) -> tuple[int, int]:
        q, c = item
        stride = min(params.get("doc_stride", 128), max_length // 2)
        room = max(1, max_length - len(q) - 3)
        return windows(len(c), room, min(stride, room - 1)), min(len(q) + len(c) + 3, max_length)

    def call_key(self, params: dict[str, Any]) -> tuple:
        return tuple(sorted({**self._defaults, **params}.items()))

    def warm_up_items(self, max_length: int, n: int) -> list[Any]:
        return [("中" * 4, "中" * (max_length - 7))] * n

    def response_schema(self) -> dict[str, Any]:
        return {"oneOf": [_ANSWER, {"type": "array"}]}
