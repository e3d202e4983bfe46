"""Text classification: readers and metrics (heads, preprocessing come with the task layer)."""

from nlp.tasks.classification.data import PROBLEM_TYPES, read_classification
from nlp.tasks.classification.metrics import classification_metrics, multilabel_metrics, regression_metrics

__all__ = ["PROBLEM_TYPES", "read_classification", "classification_metrics", "multilabel_metrics",
           "regression_metrics"]
