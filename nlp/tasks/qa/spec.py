"""The extractive question answering task (SQuAD / CMRC2018): answer spans in a context."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator, Mapping, Sequence

import numpy as np

from nlp._common import NlpError
from nlp._extras import LazyModule
from nlp._settings import Problem
from nlp.tasks.qa.data import read_squad
from nlp.tasks.qa.pipeline import QuestionAnsweringPipeline
from nlp.tasks.qa.heads import ErnieForQuestionAnswering
from nlp.tasks.qa.metrics import cmrc2018_metrics
from nlp.tasks.qa.postprocess import postprocess_qa
from nlp.tasks.qa.preprocess import preprocess_qa
from nlp.tasks.options import CallOption
from nlp.tasks.qa.serving import QA_MAX_TOP_K, QuestionAnsweringAdapter
from nlp.tasks.spec import TaskSettings, TaskSpec

datasets = LazyModule("datasets", "reading and preparing datasets")  # the train extra

__all__ = ["QuestionAnsweringSpec", "QuestionAnsweringSettings", "QUESTION_ANSWERING"]

# Questions paired with the check texts of an export (each text a context).
_CHECK_QUESTIONS = ["这是哪里？", "谁说的？", "评价怎么样？", "为什么？"]


_IN_A_WINDOW = " (tokens in one window of this model)"  # why a QA option stops at max_length


@dataclass
class QuestionAnsweringSettings(TaskSettings):
    """The recipe's task section for extractive QA (formerly data.doc_stride / data.max_answer_length)."""

    name: str = "question-answering"
    doc_stride: int = 128  # overlap between consecutive windows of a long context, in tokens
    max_answer_length: int = 30  # longest answer span considered, in tokens

    def problems(self) -> Iterator[Problem]:
        for name in ("doc_stride", "max_answer_length"):
            if getattr(self, name) < 1:
                yield Problem(name, f"{name} must be >= 1, got {getattr(self, name)}")


def _pad_rows(rows: Sequence[np.ndarray], value: float) -> np.ndarray:
    width = max(len(r) for r in rows)
    out = np.full((len(rows), width), value, dtype=np.float64)
    for i, r in enumerate(rows):
        out[i, : len(r)] = r
    return out


class QuestionAnsweringSpec(TaskSpec):
    name = "question-answering"
    aliases = ("qa", "extractive-qa")
    extra = "qa"
    requires = {"train": ("nltk",)}  # the CMRC2018 metric's mixed segmentation
    head = ErnieForQuestionAnswering
    pipeline_class = QuestionAnsweringPipeline
    architecture_suffix = "ForQuestionAnswering"
    label_column = "answers"
    label_keys = ("start_positions", "end_positions")
    has_label_set = False
    packable = False  # answer positions are per window
    default_max_length = 384
    input_fields = ("question", "context")
    result_field = "answer"
    settings = QuestionAnsweringSettings
    data_keys_moved = ("doc_stride", "max_answer_length")  # data.doc_stride & co. in older recipes
    serving = QuestionAnsweringAdapter()
    call_options = (
        CallOption("top_k", int, 1, "answers per question (more than 1: a list per question)", minimum=1,
                   maximum=QA_MAX_TOP_K, why_maximum=" (the span search's n-best width)"),
        CallOption("max_answer_length", int, 30, "longest answer in tokens", minimum=1, maximum="max_length",
                   why_maximum=_IN_A_WINDOW, uses=("predict", "serve", "evaluate")),
        CallOption("handle_impossible_answer", bool, False, "answer \"\" when no span beats [CLS]"),
        CallOption("doc_stride", int, 128, "tokens shared by consecutive windows of a long context", minimum=1,
                   maximum="max_length", why_maximum=_IN_A_WINDOW, uses=("predict", "serve", "evaluate")),
    )
    export_outputs = {"start_logits": ("batch", "sequence"), "end_logits": ("batch", "sequence")}
    distill_losses = {"start_logits": "softmax", "end_logits": "softmax"}  # distributions over positions
    reader = staticmethod(read_squad)
    preprocess = staticmethod(preprocess_qa)
    metric = staticmethod(cmrc2018_metrics)
    postprocess = staticmethod(postprocess_qa)

    def read(self, path: str, data: Any, *, need_labels: bool = False) -> datasets.Dataset:
        # A question without answers is a no-answer example: a SQuAD file is always labelled.
        return read_squad(path, **dict(data.reader))

    def summarize(self, ds: datasets.Dataset) -> list[str]:
        return [f"{len(ds)} questions, {sum(ds['is_impossible'])} unanswerable"]

    def training_texts(self, ds: datasets.Dataset) -> list[str]:
        return list(dict.fromkeys(ds["context"])) + list(ds["question"])

    def check_data(self, data: Any, settings: Any = None) -> list[str]:
        errors = []
        stride = self.task_settings(settings).doc_stride
        if stride >= data.max_length:
            errors.append(f"task.doc_stride ({stride}) must be smaller than data.max_length "
                          f"({data.max_length}): windows overlap by doc_stride tokens")
        return errors

    def featurize(self, columns: Mapping[str, Sequence[Any]], tokenizer: Any, data: Any,
                  label_names: list[str] | None, *, settings: Any = None) -> dict[str, list]:
        return preprocess_qa(columns, tokenizer, max_length=data.max_length,
                             doc_stride=self.task_settings(settings).doc_stride)

    def head_config(self, label_names: list[str] | None, train: Any = None, settings: Any = None) -> dict[str, Any]:
        return {"num_labels": 2}  # a start and an end logit per token

    def keep_logits(self, model: Any, outputs: Any, batch: Mapping[str, Any]) -> Any:
        return outputs.start_logits, outputs.end_logits

    def score(self, predictions: Sequence[Any], label_ids: Sequence[Any], *, label_names: list[str] | None,
              examples: Any, features: Sequence[Mapping[str, Any]] | None, data: Any,
              settings: Any = None) -> dict[str, float]:
        if examples is None or features is None:
            raise NlpError("QA scoring needs the examples and features being scored")
        starts = _pad_rows([p[0] for p in predictions], -1e9)
        ends = _pad_rows([p[1] for p in predictions], -1e9)
        feats = {"example_id": [f["example_id"] for f in features],
                 "offset_mapping": [f["offset_mapping"] for f in features]}
        answers = postprocess_qa(examples, feats, starts, ends, max_answer_length=self.task_settings(settings).max_answer_length)
        m = cmrc2018_metrics({k: v["text"] for k, v in answers.items()}, examples)
        return {"exact_match": m["exact_match"], "f1": m["f1"], "average": m["average"]}

    def check_batch(self, tokenizer: Any, max_length: int, texts: Sequence[str]) -> dict[str, np.ndarray]:
        # each text is a context, with a question
        questions = [_CHECK_QUESTIONS[i % len(_CHECK_QUESTIONS)] for i in range(len(texts))]
        enc = tokenizer(questions, list(texts), truncation="only_second", max_length=max_length, padding=True)
        return {k: np.asarray(enc[k], dtype=np.int64) for k in self.export_inputs}


QUESTION_ANSWERING = QuestionAnsweringSpec()
