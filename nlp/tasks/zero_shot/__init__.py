"""Zero-shot text classification: texts scored against label descriptions by an embedding model."""

from nlp.tasks.zero_shot.pipeline import ZeroShotClassificationPipeline

__all__ = ["ZeroShotClassificationPipeline"]
