"""Named entity recognition: readers, tag schemes and entity-level metrics."""

from nlp.tasks.ner.data import build_ner_dataset, read_conll, read_paddle_ner
from nlp.tasks.ner.metrics import ner_metrics
from nlp.tasks.ner.tags import (
    convert_scheme,
    get_entities,
    get_entities_strict,
    label_list,
    repair_tags,
    tags_from_spans,
    validate_tags,
)

__all__ = ["read_conll", "read_paddle_ner", "build_ner_dataset", "ner_metrics", "get_entities",
           "get_entities_strict", "convert_scheme", "repair_tags", "validate_tags", "tags_from_spans",
           "label_list"]

# ---- heads, CRF, preprocessing and post-processing (task-layer helper) ----
from nlp.tasks.ner.crf import LinearChainCRF  # noqa: E402
from nlp.tasks.ner.heads import ErnieForTokenClassification, TokenClassifierOutput  # noqa: E402
from nlp.tasks.ner.postprocess import tags_to_entities  # noqa: E402
from nlp.tasks.ner.preprocess import align_labels, preprocess_ner, word_tags_from_tokens  # noqa: E402

__all__ += ["ErnieForTokenClassification", "TokenClassifierOutput", "LinearChainCRF", "preprocess_ner",
            "align_labels", "word_tags_from_tokens", "tags_to_entities"]
