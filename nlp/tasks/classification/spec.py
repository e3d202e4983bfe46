"""The text classification task: single texts and pairs; single-label, multi-label, regression."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from nlp._common import ConfigError
from nlp._extras import LazyModule
from nlp.tasks.classification.few_shot import FewShotSettings, prepare_few_shot, sample_per_class
from nlp.tasks.classification.data import read_classification
from nlp.tasks.classification.pipeline import TextClassificationPipeline
from nlp.tasks.classification.heads import ErnieForSequenceClassification
from nlp.tasks.classification.metrics import classification_metrics, multilabel_metrics, regression_metrics
from nlp.tasks.classification.preprocess import preprocess_classification
from nlp.tasks.classification.serving import ClassificationAdapter
from nlp.tasks.options import CallOption
from nlp.tasks.spec import TaskSettings, TaskSpec

datasets = LazyModule("datasets", "reading and preparing datasets")  # the train extra

__all__ = ["ClassificationSpec", "ClassificationSettings", "CLASSIFICATION", "problem_type_of"]


@dataclass
class ClassificationSettings(TaskSettings):
    """The recipe's task section for classification."""

    name: str = "text-classification"
    # train from k examples per class the SetFit way (few_shot.py): the train split is cut to k
    # per class, the encoder tuned on pairs of them, a logistic-regression head fitted, then the
    # engine's epochs train the head (and the encoder with `end_to_end`). None: ordinary training
    few_shot: FewShotSettings | None = None


def problem_type_of(label_feature: Any) -> str:
    """transformers' `problem_type` of a dataset's label column: a list of classes per example
    is multi-label, a number regression, a class single-label."""
    if isinstance(label_feature, datasets.Sequence):
        return "multi_label_classification"
    if isinstance(label_feature, datasets.ClassLabel):
        return "single_label_classification"
    return "regression"


class ClassificationSpec(TaskSpec):
    name = "text-classification"
    aliases = ("classification", "sequence-classification", "sentiment-analysis")
    head = ErnieForSequenceClassification
    default_model = "e5-small-zh-sentiment"  # binary sentiment (negative / positive) of reviews-zh: its README says how it was made
    pipeline_class = TextClassificationPipeline
    architecture_suffix = "ForSequenceClassification"
    label_column = "label"
    optional_input_fields = ("text_pair",)
    augment_columns = ("text", "text_pair")  # sentence-level: the labels point at no token
    export_outputs = {"logits": ("batch", "num_labels")}
    distill_losses = {"logits": "softmax"}  # single-label; `distill_targets` says so per problem type
    result_field = "labels"
    serving = ClassificationAdapter()
    settings = ClassificationSettings
    call_options = (CallOption("top_k", int, 1, "how many labels to return per text, best first (null: all)",
                               minimum=1, nullable=True),)
    reader = staticmethod(read_classification)
    preprocess = staticmethod(preprocess_classification)
    metric = staticmethod(classification_metrics)

    def serving_routes(self) -> dict[str, Any]:
        from nlp.tasks.classification.serving import InferenceRootAdapter

        root = InferenceRootAdapter()
        root.task, root.options = self.serving.task, self.serving.options
        return {"/predict": self.serving, "/": root}

    def read(self, path: str, data: Any, *, need_labels: bool = False) -> datasets.Dataset:
        kwargs = dict(data.reader)
        if data.label_names is not None:
            kwargs.setdefault("label_names", data.label_names)
        return read_classification(path, require_labels=need_labels, **kwargs)

    def label_names(self, ds: datasets.Dataset) -> list[str] | None:
        label = ds.features.get("label")
        names = getattr(label, "names", None) or getattr(getattr(label, "feature", None), "names", None)
        return list(names) if names else None

    def summarize(self, ds: datasets.Dataset) -> list[str]:
        lines = [f"{len(ds)} records"]
        names = self.label_names(ds)
        if names and problem_type_of(ds.features["label"]) == "single_label_classification":
            lines += [f"  {names[label]}: {n}" for label, n in sorted(Counter(ds["label"]).items())]
        return lines

    def training_texts(self, ds: datasets.Dataset) -> list[str]:
        texts = list(ds["text"])
        return texts + (list(ds["text_pair"]) if "text_pair" in ds.column_names else [])

    def featurize(self, columns: Mapping[str, Sequence[Any]], tokenizer: Any, data: Any,
                  label_names: list[str] | None, *, settings: Any = None) -> dict[str, list]:
        return preprocess_classification(
            columns, tokenizer, max_length=data.max_length,
            label2id={n: i for i, n in enumerate(label_names)} if label_names else None,
            num_labels=len(label_names) if label_names else None)

    def head_config(self, label_names: list[str] | None, train: Any = None, settings: Any = None) -> dict[str, Any]:
        # The problem type is decided here, from the data, not from the first batch's dtype.
        if label_names is None:
            return {"num_labels": 1, "problem_type": "regression"}
        out = super().head_config(label_names)
        if train is not None and "label" in train.column_names:
            out["problem_type"] = problem_type_of(train.features["label"])
        if getattr(settings, "few_shot", None) is not None:
            out["classifier_pooling"] = "mean"  # the sentence embedding the pairs tune (heads.py)
        return out

    def training_split(self, ds: datasets.Dataset, settings: Any = None) -> datasets.Dataset:
        few_shot = getattr(settings, "few_shot", None)
        if few_shot is None:
            return ds
        if problem_type_of(ds.features["label"]) != "single_label_classification":
            raise ConfigError("task.few_shot needs single-label classes (one label name per example); this train "
                              "split's labels are " + problem_type_of(ds.features["label"]).replace("_", " "))
        return ds.select(sample_per_class(ds["label"], few_shot.k, few_shot.seed))

    def prepare_model(self, model: Any, features: Sequence[dict], collate: Callable, settings: Any = None, *,
                      tokenizer: Any = None, data: Any = None, label_names: Sequence[str] | None = None,
                      device: Any = "cpu") -> None:
        few_shot = getattr(settings, "few_shot", None)
        if few_shot is None:
            return
        names = list(label_names or [])
        unknown = [k for k in few_shot.label_descriptions if k not in names]
        if unknown:
            raise ConfigError(f"task.few_shot.label_descriptions names {unknown[0]!r}, not a label of the data; "
                              f"its labels: {', '.join(names)}")
        described = list(few_shot.label_descriptions.items())
        anchors: list[dict] = []
        if described:
            columns = preprocess_classification(
                {"text": [d for _, d in described], "label": [names.index(n) for n, _ in described]}, tokenizer,
                max_length=data.max_length, num_labels=len(names))
            anchors = [{k: v[i] for k, v in columns.items()} for i in range(len(described))]
        prepare_few_shot(model.to(device), features, collate, few_shot, names, anchors, device=device)

    def distill_targets(self, config: Any) -> dict[str, str]:
        # one score per label of a multi-label head; one number of a regression head
        kind = {"multi_label_classification": "sigmoid", "regression": "mse"}.get(
            getattr(config, "problem_type", None), "softmax")
        return {"logits": "mse" if config.num_labels == 1 else kind}

    def score(self, predictions: Sequence[Any], label_ids: Sequence[Any], *, label_names: list[str] | None,
              examples: Any, features: Any, data: Any, settings: Any = None) -> dict[str, float]:
        logits = np.stack(predictions)
        if logits.shape[-1] == 1:  # regression
            return regression_metrics([float(x) for x in label_ids], logits[:, 0].tolist())
        if np.ndim(label_ids[0]) == 1:  # multi-label: multi-hot rows, a label is on where its logit > 0
            m = multilabel_metrics([[int(v) for v in row] for row in label_ids], (logits > 0).astype(int).tolist())
            return {k: float(v) for k, v in m.items()}
        m = classification_metrics([int(x) for x in label_ids], logits.argmax(-1).tolist(),
                                   labels=range(len(label_names or [])) or None)
        return {k: float(v) for k, v in m.items() if k != "per_class"}

    def predict(self, pipe: Any, records: list[dict[str, Any]], *, top_k: int | None = 1) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = [{} for _ in records]
        paired = [i for i, r in enumerate(records) if "text_pair" in r]
        single = [i for i, r in enumerate(records) if "text_pair" not in r]
        for group, pairs in ((single, None), (paired, [records[i]["text_pair"] for i in paired])):
            if group:
                for i, labels in zip(group, pipe([records[i]["text"] for i in group], pairs, top_k=top_k)):
                    out[i] = {"labels": labels}
        return out

    def empty_prediction(self) -> dict[str, Any]:
        return {"labels": []}


CLASSIFICATION = ClassificationSpec()
