"""The extractive question answering pipeline: answers with character offsets, searched over every window.

    qa = nlp.pipeline("question-answering", model="qa_out/")
    qa(question="谁在北京?", context="张三在北京工作")  # {"answer", "score", "start", "end"}
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from nlp._common import DataError
from nlp.tasks.base_pipeline import MODEL_INPUTS, Pipeline, as_batch
from nlp.tasks.qa.heads import ErnieForQuestionAnswering
from nlp.tasks.qa.postprocess import postprocess_qa
from nlp.tasks.qa.preprocess import preprocess_qa

__all__ = ["QuestionAnsweringPipeline"]


class QuestionAnsweringPipeline(Pipeline):
    """Answers with score and character offsets into the context, searched over all windows."""

    task = "question-answering"
    head_class = ErnieForQuestionAnswering

    def _row(self, out: dict[str, np.ndarray], j: int, length: int) -> Any:
        return out["start_logits"][j, :length], out["end_logits"][j, :length]

    def __call__(self, question: str | Sequence[str], context: str | Sequence[str], *, top_k: int = 1,
                 doc_stride: int = 128, max_answer_length: int = 30,
                 handle_impossible_answer: bool = False) -> dict | list:
        """{"answer", "score", "start", "end"} per question (a list of `top_k` of them when top_k > 1).

        With `handle_impossible_answer`, the answer is "" when [CLS] outscores every span.
        A question or context with no tokens (blank, or only characters the tokenizer drops) has
        no answer: {"answer": "", "score": 0.0, "start": 0, "end": 0}.
        """
        questions, single = as_batch(question, "question")
        contexts, _ = as_batch(context, "context")
        if len(contexts) == 1 and len(questions) > 1:
            contexts = contexts * len(questions)
        if len(contexts) != len(questions):
            raise DataError(f"{len(questions)} questions but {len(contexts)} contexts")
        if not questions:
            return []
        none = {"answer": "", "score": 0.0, "start": 0, "end": 0}
        results: list[Any] = [dict(none) for _ in questions]
        # a question or context with no tokens has no answer (and is not a window to run)
        empty = set(self.tokenless(questions)) | set(self.tokenless(contexts))
        todo = [i for i in range(len(questions)) if i not in empty]
        if not todo:
            return results[0] if single else results
        stride = min(doc_stride, self.max_length // 2)
        examples = {"id": [str(i) for i in todo], "question": [questions[i] for i in todo],
                    "context": [contexts[i] for i in todo]}
        feats = preprocess_qa(examples, self.tokenizer, max_length=self.max_length, doc_stride=stride)
        rows = [{k: feats[k][r] for k in MODEL_INPUTS if k in feats} for r in range(len(feats["input_ids"]))]
        outs = self._forward(rows)
        T = max(len(s) for s, _ in outs)
        start = np.full((len(outs), T), -1e9)
        end = np.full((len(outs), T), -1e9)
        for r, (s, e) in enumerate(outs):
            start[r, : len(s)] = s
            end[r, : len(e)] = e
        preds = postprocess_qa(examples, feats, start, end, n_best=max(20, top_k),
                               max_answer_length=max_answer_length,
                               allow_impossible=handle_impossible_answer)
        for eid in examples["id"]:
            p = preds[eid]
            if p["text"] == "" or top_k == 1:
                results[int(eid)] = {"answer": p["text"], "score": p["score"], "start": p["start"], "end": p["end"]}
            else:
                results[int(eid)] = [{"answer": c["text"], "score": c["score"], "start": c["start"], "end": c["end"]}
                                     for c in p["n_best"][:top_k]]
        return results[0] if single else results
