"""The UIE head: backbone -> two pointer heads, `linear_start` and `linear_end` (H -> 1 each),
a sigmoid per token: the probability that a span answering the prompt starts (ends) there.

The architecture of PaddleNLP's `UIE` (Lu et al. 2022, "Unified Structure Generation for
Universal Information Extraction", as PaddleNLP's `paddlenlp.transformers.UIE` implements it):
the encoder reads `[CLS] prompt [SEP] text [SEP]`; the heads sit at the top level of the state
dict under PaddleNLP's own names, so a converted `uie-*` checkpoint loads key for key:

    ernie.embeddings.* / ernie.encoder.layer.N.*   the encoder, as every ERNIE checkpoint here
    linear_start.weight (1, H), linear_start.bias (1,)
    linear_end.weight (1, H),   linear_end.bias (1,)

There is no pooler (UIE never uses it; a checkpoint's `ernie.pooler.*` is ignored on load).
config.json: `architectures: ["ErnieForInformationExtraction"]` (`BertFor...` on a BERT
encoder), the encoder's fields as transformers names them; of the head's only, where a recipe
set it, `uie_positive_weight` (training's loss, nothing inference reads).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from nlp._common import DataError
from nlp.models import ErnieConfig, ErnieModel, PreTrainedEncoder

__all__ = ["ErnieForInformationExtraction", "InformationExtractionOutput", "pointer_loss", "POSITIVE_WEIGHT"]

# config.json's field for the training loss's weight on span tokens (the recipe's
# task.positive_weight); absent (PaddleNLP's checkpoints, the default) is UIE's loss
POSITIVE_WEIGHT = "uie_positive_weight"


@dataclass
class InformationExtractionOutput:
    """`start_prob`, `end_prob` (B, T) in [0, 1]; `loss` when start and end labels were given."""

    loss: torch.Tensor | None
    start_prob: torch.Tensor
    end_prob: torch.Tensor


def pointer_loss(start_prob: torch.Tensor, end_prob: torch.Tensor, start_labels: torch.Tensor,
                 end_labels: torch.Tensor, attention_mask: torch.Tensor | None,
                 positive_weight: float = 1.0) -> torch.Tensor:
    """UIE's loss: binary cross-entropy of each pointer against its 0/1 labels, averaged over
    the real tokens (padding excluded), start and end averaged. Computed on the probabilities as
    PaddleNLP does (clamped, so that a saturated sigmoid gives a finite loss). `positive_weight`
    scales the terms of the labelled (span start / end) tokens: 1 is UIE's loss."""
    mask = torch.ones_like(start_prob) if attention_mask is None else attention_mask.to(start_prob.dtype)
    eps = 1e-7

    def bce(prob: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        # written out in fp32 rather than F.binary_cross_entropy, which CUDA autocast refuses
        # (bf16 / fp16 training on a GPU); the same values
        p, t = prob.float().clamp(eps, 1 - eps), target.float()
        per_token = -(t * torch.log(p) + (1 - t) * torch.log1p(-p))
        if positive_weight != 1.0:
            per_token = per_token * (1 + (positive_weight - 1) * target.float())
        return (per_token * mask).sum() / mask.sum().clamp(min=1)

    return (bce(start_prob, start_labels) + bce(end_prob, end_labels)) / 2


class ErnieForInformationExtraction(PreTrainedEncoder):
    """Backbone (no pooler) + `linear_start`, `linear_end` (H -> 1), sigmoid per token."""

    _HF_SUFFIX = "ForInformationExtraction"

    def __init__(self, config: ErnieConfig) -> None:
        super().__init__(config)
        self.backbone = ErnieModel(config, add_pooling_layer=False)
        self.linear_start = nn.Linear(config.hidden_size, 1)
        self.linear_end = nn.Linear(config.hidden_size, 1)
        self.post_init()

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                token_type_ids: torch.Tensor | None = None, task_type_ids: torch.Tensor | None = None,
                position_ids: torch.Tensor | None = None, start_labels: torch.Tensor | None = None,
                end_labels: torch.Tensor | None = None) -> InformationExtractionOutput:
        x = self.backbone(input_ids, attention_mask, token_type_ids, task_type_ids,
                          position_ids).last_hidden_state  # (B, T, H)
        start_prob = torch.sigmoid(self.linear_start(x).squeeze(-1))  # (B, T)
        end_prob = torch.sigmoid(self.linear_end(x).squeeze(-1))  # (B, T)
        loss = None
        if start_labels is not None and end_labels is not None:
            if start_labels.shape != start_prob.shape or end_labels.shape != end_prob.shape:
                raise DataError(f"start/end labels have shapes {tuple(start_labels.shape)}/"
                                f"{tuple(end_labels.shape)}; the batch's tokens are {tuple(start_prob.shape)}")
            loss = pointer_loss(start_prob, end_prob, start_labels, end_labels, attention_mask,
                                float(self.config.extra.get(POSITIVE_WEIGHT, 1.0)))
        return InformationExtractionOutput(loss=loss, start_prob=start_prob, end_prob=end_prob)
