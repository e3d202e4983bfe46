"""Extractive question answering: SQuAD/CMRC2018 reader and the official CMRC2018 metrics."""

from nlp.tasks.qa.data import QA_FEATURES, read_squad
from nlp.tasks.qa.metrics import cmrc2018_metrics, cmrc_em, cmrc_f1, mixed_segmentation

__all__ = ["QA_FEATURES", "read_squad", "cmrc2018_metrics", "cmrc_em", "cmrc_f1", "mixed_segmentation"]
