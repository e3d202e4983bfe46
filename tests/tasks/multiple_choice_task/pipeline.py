"""The pipeline: the best choice per question, with its score and every choice's score."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from nlp._common import DataError
from nlp.tasks.base_pipeline import Pipeline, as_batch

from .collate import MultipleChoiceCollator
from .heads import ErnieForMultipleChoice

__all__ = ["MultipleChoicePipeline"]


class MultipleChoicePipeline(Pipeline):
    task = "multiple-choice"
    head_class = ErnieForMultipleChoice

    def _make_collator(self, multiple: int | None) -> Any:
        return MultipleChoiceCollator(pad_token_id=self.tokenizer.pad_token_id, pad_to_multiple_of=multiple)

    def _row(self, out: dict[str, np.ndarray], j: int, length: int) -> Any:
        return out["logits"][j]

    def __call__(self, question: str | Sequence[str], choices: Sequence[str] | Sequence[Sequence[str]],
                 *, min_score: float = 0.0) -> dict | list[dict]:
        """{"label": index, "choice": text, "score", "scores"} per question (softmax over its choices);
        the label and choice are None where the best choice's probability is below `min_score`."""
        questions, single = as_batch(question, "question")
        lists = [list(choices)] if single else [list(c) for c in choices]
        if len(lists) != len(questions):
            raise DataError(f"{len(questions)} questions but {len(lists)} lists of choices")
        for i, options in enumerate(lists):
            as_batch(options, f"choices of question {i}")
        if not questions:
            return []
        feats = []
        for q, options in zip(questions, lists):
            enc = self.tokenizer([q] * len(options), options, truncation=True, max_length=self.max_length)
            feats.append({k: enc[k] for k in ("input_ids", "token_type_ids", "attention_mask") if k in enc})
        outs: list[Any] = [None] * len(feats)
        for n in sorted({len(o) for o in lists}):  # a batch holds questions with as many choices
            group = [i for i, o in enumerate(lists) if len(o) == n]
            for i, logits in zip(group, self._forward([feats[i] for i in group])):
                outs[i] = logits
        results = []
        for logits, options in zip(outs, lists):
            e = np.exp(logits - logits.max())
            p = e / e.sum()
            best = int(p.argmax())
            sure = float(p[best]) >= min_score
            results.append({"label": best if sure else None, "choice": options[best] if sure else None,
                            "score": float(p[best]), "scores": [float(x) for x in p]})
        return results[0] if single else results
