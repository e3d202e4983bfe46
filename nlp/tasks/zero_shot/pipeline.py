"""Zero-shot classification with an embedding model, in transformers' call and answer shape.

    clf = nlp.pipeline("zero-shot-classification", model="intfloat/multilingual-e5-small")
    clf("国足客场两球击败对手", candidate_labels=["体育", "财经", "科技"],
        hypothesis_template="这是一条关于{}的新闻")
    # {"sequence": "国足客场两球击败对手", "labels": ["体育", "科技", "财经"], "scores": [0.93, 0.04, 0.03]}

Each label is put into `hypothesis_template` and embedded with the model's "passage" prompt;
each text is embedded with its "query" prompt (prompts.py: e5's "query: " / "passage: "; none
for a model that declares none), as a search embeds a query and the documents it looks for.
A text's scores are the cosines of its vector with the labels' vectors:
- single-label (`multi_label=False`, the default): a softmax over the labels of the cosines
  divided by the model's contrastive temperature (config.json `contrastive_temperature`, the
  one it was trained at; 0.05 when it names none), so they add up to 1;
- `multi_label=True`, or a single candidate label (as transformers does): each label's cosine
  on its own, in [-1, 1]. It is a similarity, not a probability: compare labels, or pick a
  threshold on labelled texts of your own.
Labels come back best first. The labels' vectors are kept per (labels, template) for the next
calls (a server answers many texts against the same labels). Long texts are embedded whole, in
windows, as the feature-extraction pipeline does (`truncate=True`: their first window alone).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import numpy as np

from nlp.tasks.base_pipeline import as_batch
from nlp.tasks.embedding.heads import DEFAULT_TEMPERATURE
from nlp.tasks.embedding.pipeline import FeatureExtractionPipeline
from nlp.tasks.embedding.prompts import PASSAGE, QUERY
from nlp.tasks.zero_shot.labels import DEFAULT_TEMPLATE, check_labels, hypotheses

__all__ = ["ZeroShotClassificationPipeline"]

_CACHED_LABEL_SETS = 16  # label sets whose vectors are kept (least recently used dropped first)


class ZeroShotClassificationPipeline(FeatureExtractionPipeline):
    """Texts -> {"sequence", "labels", "scores"} per text, labels best first."""

    task = "zero-shot-classification"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._label_vectors: OrderedDict[tuple[str, ...], np.ndarray] = OrderedDict()

    @property
    def temperature(self) -> float:
        """What cosines are divided by before the single-label softmax."""
        return float(self.config.extra.get("contrastive_temperature", DEFAULT_TEMPERATURE))

    def __call__(self, sequences: str | Sequence[str], candidate_labels: Any = None, *,
                 hypothesis_template: str = DEFAULT_TEMPLATE, multi_label: bool = False,
                 truncate: bool = False) -> Any:
        """One answer for one text, a list of answers for a list. `candidate_labels`: a list of
        labels, or one string of them separated by commas."""
        scores, labels, batch, single = self.scores(sequences, candidate_labels, truncate=truncate,
                                                    hypothesis_template=hypothesis_template, multi_label=multi_label)
        answers = []
        for text, row in zip(batch, scores):
            order = np.argsort(-row, kind="stable")
            answers.append({"sequence": text, "labels": [labels[i] for i in order],
                            "scores": [float(row[i]) for i in order]})
        return answers[0] if single else answers

    def scores(self, sequences: str | Sequence[str], candidate_labels: Any, *,
               hypothesis_template: str = DEFAULT_TEMPLATE,
               multi_label: bool = False, truncate: bool = False) -> tuple[np.ndarray, list[str], list[str], bool]:
        """(N, L) scores in the order of the labels as given, the labels, the texts, and whether
        one text was given: what `__call__` sorts, for a caller that wants the matrix."""
        if not isinstance(multi_label, bool):
            raise TypeError(f"multi_label must be True or False; got {multi_label!r:.40}")
        labels = check_labels(candidate_labels)
        label_texts = hypotheses(labels, hypothesis_template)
        batch, single = as_batch(sequences, "sequences")
        if not batch:
            return np.zeros((0, len(labels)), np.float32), labels, batch, single
        texts, _ = self._encode(batch, single, truncate=truncate, stride=None, normalize=True,
                                prompt=self.prompts.for_role(QUERY))
        cosines = texts @ self._labels(tuple(label_texts)).T  # (N, L)
        if multi_label or len(labels) == 1:
            return cosines, labels, batch, single
        logits = cosines / self.temperature
        e = np.exp(logits - logits.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True), labels, batch, single

    def _labels(self, label_texts: tuple[str, ...]) -> np.ndarray:
        """The (L, H) normalised vectors of the hypotheses, from the cache when it has them."""
        cached = self._label_vectors.get(label_texts)
        if cached is None:
            cached, _ = self._encode(list(label_texts), False, truncate=False, stride=None, normalize=True,
                                     prompt=self.prompts.for_role(PASSAGE))
            self._label_vectors[label_texts] = cached
            while len(self._label_vectors) > _CACHED_LABEL_SETS:
                self._label_vectors.popitem(last=False)
        self._label_vectors.move_to_end(label_texts)
        return cached
