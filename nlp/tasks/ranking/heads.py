"""The cross-encoder: ``[CLS] query [SEP] passage [SEP]`` through the backbone, the pooled
[CLS] through dropout and a linear layer to one relevance score (logit).

The weights are those of transformers' `BertForSequenceClassification` /
`ErnieForSequenceClassification` with one label (parameter names and maths), which is how the
rerankers people use are published (bge-reranker, the sentence-transformers CrossEncoders): a
directory saved here loads in transformers' `AutoModelForSequenceClassification` with the same
scores, and theirs loads here. Only config.json's `architectures` entry differs
("BertForTextRanking"), so that the toolkit tells a reranker from a one-label regressor.

Inputs of shape (B, T) give scores (B, 1); a training batch of query groups, (B, G, T), gives
(B, G) and, with `labels` (B, G) of relevance, the loss the config names (`ranking_loss`:
"listwise" or "pointwise", losses.py), set from the recipe's `task.ranking_loss`.
"""

from __future__ import annotations

import torch

from nlp._common import ConfigError
from nlp.models import ErnieConfig
from nlp.tasks.classification.heads import ErnieForSequenceClassification, SequenceClassifierOutput
from nlp.tasks.ranking.losses import RANKING_LOSSES

__all__ = ["ErnieForTextRanking", "DEFAULT_LOSS"]

DEFAULT_LOSS = "listwise"


class ErnieForTextRanking(ErnieForSequenceClassification):
    """A one-label sequence classifier read as a relevance score."""

    _HF_SUFFIX = "ForTextRanking"

    def __init__(self, config: ErnieConfig) -> None:
        if config.num_labels != 1:  # a relevance score: one output, whatever the backbone's config said
            config.num_labels, config.id2label, config.label2id = 1, {0: "LABEL_0"}, {"LABEL_0": 0}
        loss = config.extra.setdefault("ranking_loss", DEFAULT_LOSS)
        if loss not in RANKING_LOSSES:
            raise ConfigError(f"config ranking_loss={loss!r}; valid: {', '.join(RANKING_LOSSES)}")
        super().__init__(config)
        self.config.problem_type = None  # the loss is the ranking loss, not the classifier's

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                token_type_ids: torch.Tensor | None = None, labels: torch.Tensor | None = None
                ) -> SequenceClassifierOutput:
        grouped = input_ids.dim() == 3
        B = input_ids.shape[0]
        flat = [None if x is None else (x.reshape(-1, x.shape[-1]) if grouped else x)
                for x in (input_ids, attention_mask, token_type_ids)]
        pooled = self.backbone.pooled_output(*flat)  # (N, H)
        logits = self.classifier(self.dropout(pooled))  # (N, 1)
        if grouped:
            logits = logits.view(B, -1)  # (B, G)
        loss = None
        if labels is not None:
            scores = logits if grouped else logits[:, 0]
            loss = RANKING_LOSSES[self.config.extra["ranking_loss"]](scores, labels.to(scores.dtype))
        return SequenceClassifierOutput(loss=loss, logits=logits)
