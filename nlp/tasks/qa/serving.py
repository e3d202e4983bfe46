"""How `POST /predict` takes and answers extractive QA (nlp/tasks/serving.py):

    "inputs": {"question", "context"} | [...]  ->  {"answer", "score", "start", "end"} (transformers' shape)
"""

from __future__ import annotations

from typing import Any

from nlp.tasks.serving import FieldsAdapter, windows

__all__ = ["QA_MAX_TOP_K", "QuestionAnsweringAdapter"]

# The QA parameters that multiply work or memory are bounded (422 past them; the spec's
# call_options). The span search looks at n_best = max(20, top_k) starts x n_best ends in every
# window, so a top_k of 20 costs nothing over the default; an answer longer than a window cannot
# be found, so max_answer_length stops at the window (max_length); doc_stride is capped at half a
# window by the pipeline, so at most twice the windows, which the cost counts.
QA_MAX_TOP_K = 20

_ANSWER = {"type": "object", "properties": {
    "answer": {"type": "string"}, "score": {"type": "number"},
    "start": {"type": "integer", "description": "character offset into the context"},
    "end": {"type": "integer", "description": "exclusive"}}}


class QuestionAnsweringAdapter(FieldsAdapter):
    fields = ("question", "context")
    output_description = "the answer (a list for a list of questions, or for top_k > 1)"
    def cost(self, item: Any, params: dict[str, Any], max_length: int) -> tuple[int, int]:
        q, c = item
        stride = min(dict(self.call_key(params))["doc_stride"], max_length // 2)
        room = max(1, max_length - len(q) - 3)
        return windows(len(c), room, min(stride, room - 1)), min(len(q) + len(c) + 3, max_length)

    def warm_up_items(self, max_length: int, n: int) -> list[Any]:
        return [("中" * 4, "中" * (max_length - 7))] * n

    def response_schema(self) -> dict[str, Any]:
        return {"oneOf": [_ANSWER, {"type": "array"}]}
