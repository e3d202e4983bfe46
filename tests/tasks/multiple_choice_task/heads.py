"""The head: each (question, choice) row through the backbone's pooler, one score per choice,
softmax over the choices (transformers' ErnieForMultipleChoice / BertForMultipleChoice)."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from nlp.models import Dropout, ErnieConfig, ErnieModel, PreTrainedEncoder

__all__ = ["ErnieForMultipleChoice", "MultipleChoiceOutput"]


@dataclass
class MultipleChoiceOutput:
    loss: torch.Tensor | None
    logits: torch.Tensor  # (B, C)


class ErnieForMultipleChoice(PreTrainedEncoder):
    _HF_SUFFIX = "ForMultipleChoice"

    def __init__(self, config: ErnieConfig) -> None:
        super().__init__(config)
        self.backbone = ErnieModel(config, add_pooling_layer=True)
        p = config.classifier_dropout
        self.dropout = Dropout(config.hidden_dropout_prob if p is None else p)
        self.classifier = nn.Linear(config.hidden_size, 1)
        self.post_init()

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                token_type_ids: torch.Tensor | None = None, labels: torch.Tensor | None = None) -> MultipleChoiceOutput:
        B, C, T = input_ids.shape
        flat = [None if x is None else x.reshape(B * C, T) for x in (input_ids, attention_mask, token_type_ids)]
        pooled = self.backbone.pooled_output(*flat)  # (B*C, H)
        logits = self.classifier(self.dropout(pooled)).view(B, C)  # (B, C)
        loss = None if labels is None else F.cross_entropy(logits.float(), labels.long())
        return MultipleChoiceOutput(loss=loss, logits=logits)
