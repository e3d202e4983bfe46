"""Extractive QA span head: backbone -> `qa_outputs` (H -> 2) -> start / end logits.

Exactly transformers' `ErnieForQuestionAnswering` / `BertForQuestionAnswering` (no pooler; the
loss is the mean of the start and end cross entropies, positions outside the sequence clamped
and ignored), so checkpoints move both ways with the same logits.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from nlp._common import ConfigError
from nlp.models import ErnieConfig, ErnieModel, PreTrainedEncoder

__all__ = ["ErnieForQuestionAnswering", "QuestionAnsweringOutput"]


@dataclass
class QuestionAnsweringOutput:
    """`start_logits`, `end_logits` (B, T); `loss` when start and end positions were given."""

    loss: torch.Tensor | None
    start_logits: torch.Tensor
    end_logits: torch.Tensor


class ErnieForQuestionAnswering(PreTrainedEncoder):
    """Backbone (no pooler) + `qa_outputs` (H -> 2)."""

    _HF_SUFFIX = "ForQuestionAnswering"

    def __init__(self, config: ErnieConfig) -> None:
        super().__init__(config)
        if config.num_labels != 2:  # transformers sizes qa_outputs by num_labels and splits it in two
            raise ConfigError(f"a question-answering head needs num_labels=2 (start, end), the config "
                              f"has {config.num_labels}; load it with num_labels=2")
        self.backbone = ErnieModel(config, add_pooling_layer=False)
        self.qa_outputs = nn.Linear(config.hidden_size, 2)
        self.post_init()

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                token_type_ids: torch.Tensor | None = None, task_type_ids: torch.Tensor | None = None,
                position_ids: torch.Tensor | None = None,
                start_positions: torch.Tensor | None = None,
                end_positions: torch.Tensor | None = None) -> QuestionAnsweringOutput:
        x = self.backbone(input_ids, attention_mask, token_type_ids, task_type_ids,
                          position_ids).last_hidden_state  # (B, T, H)
        start_logits, end_logits = self.qa_outputs(x).unbind(-1)  # (B, T) each
        loss = None
        if start_positions is not None and end_positions is not None:
            ignored = start_logits.shape[1]  # transformers: out-of-range targets are ignored
            s = start_positions.reshape(-1).clamp(0, ignored)
            e = end_positions.reshape(-1).clamp(0, ignored)
            loss = (F.cross_entropy(start_logits.float(), s, ignore_index=ignored)
                    + F.cross_entropy(end_logits.float(), e, ignore_index=ignored)) / 2
        return QuestionAnsweringOutput(loss=loss, start_logits=start_logits.contiguous(),
                                       end_logits=end_logits.contiguous())
