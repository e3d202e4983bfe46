"""Word segmentation as a registered task: model-free (`needs_model = False`), so
`nlp.pipeline("word-segmentation", user_dict=...)` builds its pipeline directly."""

from __future__ import annotations

from typing import Any

from nlp.tasks.segmentation.pipeline import WordSegmentationPipeline
from nlp.tasks.spec import TaskSpec

__all__ = ["WordSegmentationSpec", "WORD_SEGMENTATION"]


class WordSegmentationSpec(TaskSpec):
    name = "word-segmentation"
    aliases = ("segmentation", "cws")
    needs_model = False
    pipeline = WordSegmentationPipeline
    result_field = "words"

    def empty_prediction(self) -> dict[str, Any]:
        return {"words": []}


WORD_SEGMENTATION = WordSegmentationSpec()
