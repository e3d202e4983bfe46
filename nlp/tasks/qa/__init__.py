"""Extractive question answering: SQuAD/CMRC2018 reader and the official CMRC2018 metrics."""

from nlp.tasks.qa.data import qa_features, read_squad
from nlp.tasks.qa.metrics import cmrc2018_metrics, cmrc_em, cmrc_f1, mixed_segmentation

__all__ = ["qa_features", "read_squad", "cmrc2018_metrics", "cmrc_em", "cmrc_f1", "mixed_segmentation"]

# ---- heads, preprocessing and post-processing (task-layer helper) ----
from nlp.tasks.qa.heads import ErnieForQuestionAnswering, QuestionAnsweringOutput  # noqa: E402
from nlp.tasks.qa.postprocess import best_spans, postprocess_qa  # noqa: E402
from nlp.tasks.qa.preprocess import answer_token_span, preprocess_qa  # noqa: E402

__all__ += ["ErnieForQuestionAnswering", "QuestionAnsweringOutput", "preprocess_qa", "answer_token_span",
            "postprocess_qa", "best_spans"]
