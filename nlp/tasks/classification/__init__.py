"""Text classification: readers and metrics (heads, preprocessing come with the task layer)."""

from nlp.tasks.classification.data import PROBLEM_TYPES, read_classification
from nlp.tasks.classification.metrics import classification_metrics, multilabel_metrics, regression_metrics

__all__ = ["PROBLEM_TYPES", "read_classification", "classification_metrics", "multilabel_metrics",
           "regression_metrics"]

# ---- heads and preprocessing (task-layer helper) ----
from nlp.tasks.classification.heads import ErnieForSequenceClassification, SequenceClassifierOutput  # noqa: E402
from nlp.tasks.classification.preprocess import encode_label, preprocess_classification  # noqa: E402

__all__ += ["ErnieForSequenceClassification", "SequenceClassifierOutput", "preprocess_classification",
            "encode_label"]
