"""The text classification pipeline: labels with scores per text (or text pair).

    clf = nlp.pipeline("text-classification", model="out/")
    clf(["服务很好", "太难吃了"], top_k=2)  # [[{"label", "score"}, ...], ...]
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from nlp._common import ConfigError, DataError
from nlp.tasks.base_pipeline import MODEL_INPUTS, Pipeline, as_batch
from nlp.tasks.classification.heads import ErnieForSequenceClassification

__all__ = ["TextClassificationPipeline"]


class TextClassificationPipeline(Pipeline):
    """Labels with scores: softmax (single-label), sigmoid (multi-label) or the value (regression)."""

    task = "text-classification"
    head_class = ErnieForSequenceClassification
    on_tokenless = "error"  # the label of [CLS] [SEP] alone is the model's prior, not an answer

    def __call__(self, texts: str | Sequence[str], text_pair: str | Sequence[str] | None = None,
                 *, top_k: int | None = 1) -> list[dict] | list[list[dict]]:
        """Per text, the `top_k` labels by score ({"label", "score"}); top_k=None gives all."""
        if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1):
            raise ConfigError(f"top_k must be a whole number >= 1 (the labels per text, best first), or None for "
                              f"all of them; got {top_k!r}")  # -1 would drop the last label, 0 give every one
        batch, single = as_batch(texts, "text")
        pairs = None
        if text_pair is not None:
            pairs, _ = as_batch(text_pair, "text_pair")
            if len(pairs) != len(batch):
                raise DataError(f"{len(batch)} texts but {len(pairs)} text pairs")
        if not batch:
            return []
        self.check_tokens(batch, "text", single)
        if pairs is not None:
            self.check_tokens(pairs, "text_pair", single)
        if pairs is None:  # one window of max_length tokens: tokenize what it keeps, not a whole long text
            batch = self.kept_prefixes(batch, self.max_length - 2)
        enc = self.tokenizer(batch, pairs, truncation=True, max_length=self.max_length)
        feats = [{k: enc[k][i] for k in MODEL_INPUTS if k in enc} for i in range(len(batch))]
        cfg = self.config
        problem = cfg.problem_type or ("regression" if cfg.num_labels == 1 else "single_label_classification")
        results = []
        for logits in self._forward(feats):
            if problem == "regression":
                scores = logits
            elif problem == "multi_label_classification":
                scores = 1.0 / (1.0 + np.exp(-logits))
            else:
                e = np.exp(logits - logits.max())
                scores = e / e.sum()
            order = np.argsort(-scores, kind="stable")[: top_k or len(scores)]
            results.append([{"label": cfg.id2label[int(i)], "score": float(scores[i])} for i in order])
        return results[0] if single else results
