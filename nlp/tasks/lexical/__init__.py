"""Lexical analysis: word segmentation, POS tagging and named entities from one character tagger.

    lac = nlp.pipeline("lexical-analysis")     # the shipped ernie-tiny-zh-lexical, offline
    lac("江泽民在北京发表讲话")
    nlp.pipeline("pos-tagging"), nlp.pipeline("word-segmentation")   # the same model, other shapes

See docs/lexical.md: the tag set (nlp/tasks/lexical/tags.py), the built-in dataset
``peoples-daily-1998-lexical`` (data.py), the metrics (metrics.py), user dictionaries (userdict.py).
"""

from nlp.tasks.lexical.data import build_peoples_daily_lexical, read_tagged_words
from nlp.tasks.lexical.heads import ErnieForLexicalAnalysis
from nlp.tasks.lexical.metrics import lexical_metrics
from nlp.tasks.lexical.pipeline import (
           LexicalAnalysisPipeline,
           PosTaggingPipeline,
           SegmentationPipeline,
)
from nlp.tasks.lexical.tags import (
           POS_TAGS,
           char_tags,
           entities_from_words,
           lexical_labels,
           words_from_tags,
)
from nlp.tasks.lexical.userdict import UserDictionary, read_user_dictionary

__all__ = ["ErnieForLexicalAnalysis", "LexicalAnalysisPipeline", "PosTaggingPipeline", "SegmentationPipeline",
           "lexical_metrics", "read_tagged_words", "build_peoples_daily_lexical", "POS_TAGS", "char_tags",
           "entities_from_words", "lexical_labels", "words_from_tags", "UserDictionary", "read_user_dictionary"]
