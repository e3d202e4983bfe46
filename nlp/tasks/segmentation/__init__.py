"""Word segmentation with jieba: words with character offsets, no model needed.

The `word-segmentation` task (nlp/tasks/lexical/spec.py) runs the shipped neural lexical model by
default; this segmenter is its model-free alternative, one argument away (fast, dictionary-based):

    seg = nlp.pipeline("word-segmentation", model="jieba", user_dict=["飞桨"])
    seg("飞桨是深度学习平台")   # [{"word": "飞桨", "start": 0, "end": 2}, ...]
"""

from nlp.tasks.segmentation.pipeline import WordSegmentationPipeline

__all__ = ["WordSegmentationPipeline"]
