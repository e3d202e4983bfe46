"""Word segmentation: jieba words with character offsets, no model needed.

    seg = nlp.pipeline("word-segmentation", user_dict=["飞桨"])
    seg("飞桨是深度学习平台")   # [{"word": "飞桨", "start": 0, "end": 2}, ...]
"""

from nlp.tasks.segmentation.pipeline import WordSegmentationPipeline

__all__ = ["WordSegmentationPipeline"]
