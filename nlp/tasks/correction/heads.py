"""The correction head: an encoder, a detection head and a correction head over the vocabulary.

MacBERT4CSC (pycorrector's `macbert4csc.py`) and ERNIE-CSC (PaddleNLP's `ErnieForCSC`) both read
the text with a BERT-style encoder, then score at every position (1) whether the character is
wrong (detection: a linear layer to one logit) and (2) which character belongs there (correction:
the masked-LM head over the whole vocabulary, which already knows which character fits a context).
Soft-Masked BERT feeds the detection probability back as a soft [MASK] into a second encoder pass;
MacBERT4CSC drops that and only adds the two losses, weighted 0.7 correction / 0.3 detection,
which is what this head does: one encoder pass, the heads side by side.

The correction head is the backbone's masked-LM head, parameter for parameter (`mlm_dense`,
`mlm_norm`, `mlm_bias`, and the decoder tied to the word embeddings, under transformers'
`cls.predictions.*` names): `from_pretrained` of a masked-LM checkpoint (ernie-tiny-zh is one)
starts the correction head where pretraining left it, so before any fine-tuning it already
proposes the characters that fit. A checkpoint without an MLM head leaves it initialised afresh
(tied to the word embeddings all the same). The detection head (`detector`) is new.

Labels: the correct character's token id at every character's first token (the input's own id
where the character is right), -100 elsewhere. The detection target is `labels != input_ids`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from nlp._common import DataError
from nlp.models import ErnieConfig, ErnieForMaskedLM

__all__ = ["ErnieForSpellingCorrection", "CorrectionOutput", "DETECTION_WEIGHT"]

DETECTION_WEIGHT = 0.3  # the detection loss's share of the total (MacBERT4CSC's 0.3 / 0.7)


@dataclass
class CorrectionOutput:
    """`logits` (B, T, V): the correction head's scores; `detection_logits` (B, T): the logit that
    each token's character is wrong; `loss` when labels are given."""

    loss: torch.Tensor | None
    logits: torch.Tensor
    detection_logits: torch.Tensor


class ErnieForSpellingCorrection(ErnieForMaskedLM):
    """The masked-LM model (backbone without pooler, head H -> V with the decoder tied to the
    word embeddings, its checkpoint names) + `detector` (H -> 1)."""

    _HF_SUFFIX = "ForSpellingCorrection"

    def __init__(self, config: ErnieConfig) -> None:
        super().__init__(config)
        self.detector = nn.Linear(config.hidden_size, 1)
        self._init_weights(self.detector)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                token_type_ids: torch.Tensor | None = None, task_type_ids: torch.Tensor | None = None,
                position_ids: torch.Tensor | None = None, pack_ids: torch.Tensor | None = None,
                labels: torch.Tensor | None = None) -> CorrectionOutput:
        x = self.backbone(input_ids, attention_mask, token_type_ids, task_type_ids,
                          position_ids, pack_ids).last_hidden_state  # (B, T, H)
        detection = self.detector(x).squeeze(-1)  # (B, T)
        logits = self.vocabulary_logits(x)  # (B, T, V)
        loss = None
        if labels is not None:
            loss = self._loss(input_ids, logits, detection, labels)
        return CorrectionOutput(loss=loss, logits=logits, detection_logits=detection)

    def _loss(self, input_ids: torch.Tensor, logits: torch.Tensor, detection: torch.Tensor,
              labels: torch.Tensor) -> torch.Tensor:
        if tuple(labels.shape) != tuple(input_ids.shape):
            raise DataError(f"labels has shape {tuple(labels.shape)} but input_ids {tuple(input_ids.shape)}; "
                            "give the correct token id per token (-100 to ignore)")
        v = logits.shape[-1]
        bad = labels[(labels != -100) & ((labels < 0) | (labels >= v))]
        if bad.numel():
            raise DataError(f"label id {int(bad[0])} is outside the vocabulary [0, {v}) of this model; "
                            "labels are token ids of the correct characters")
        scored = labels != -100
        if not scored.any():  # a batch without a labelled token still takes part in backward
            return logits.sum() * 0.0 + detection.sum() * 0.0
        correction = F.cross_entropy(logits[scored].float(), labels[scored])
        wrong = (labels[scored] != input_ids[scored]).float()
        detect = F.binary_cross_entropy_with_logits(detection[scored].float(), wrong)
        return (1 - DETECTION_WEIGHT) * correction + DETECTION_WEIGHT * detect
