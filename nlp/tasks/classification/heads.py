"""Sequence classification head: pooled [CLS] -> dropout -> linear, as transformers builds it.

One class serves ERNIE and BERT checkpoints (keys `ernie.` / `bert.` by `config.model_type`),
so transformers' `ErnieForSequenceClassification` / `BertForSequenceClassification` load a
directory saved here and the other way round, with the same logits.

The loss follows transformers' `problem_type` values: "regression" (MSE),
"single_label_classification" (cross entropy), "multi_label_classification" (BCE with logits).
The type is decided before the first batch: from the data by the fine-tuning engine (the
classification task spec passes it with the labels), or "regression" when the head is built with
one label. A head built without a type for several labels infers it per batch by transformers'
rule (integer labels: single-label, float labels: multi-label) and leaves the config unchanged.

Packed rows (`pack_ids` from `nlp.tokenizer.PackingCollator`): the backbone pools the first
token of every packed sequence, giving one row per sequence in row-major order, which is the
order of the collator's 1-D `labels`.

`classifier_pooling: "mean"` in config.json (the name transformers' ModernBERT uses) makes the
classifier read the mean of the last layer over the attended tokens instead of the pooler's
tanh(dense([CLS])): the sentence embedding of a mean-pooled embedding model, which few-shot
training (few_shot.py, SetFit's recipe) tunes contrastively before fitting the classifier on it.
transformers' BertForSequenceClassification pools [CLS] whatever the config says, so such a
model gives other logits there; here every layer (evaluate, predict, export, serve) runs it.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from nlp._common import ConfigError, DataError
from nlp.models import Dropout, ErnieConfig, ErnieModel, PreTrainedEncoder

__all__ = ["ErnieForSequenceClassification", "SequenceClassifierOutput", "CLASSIFIER_POOLINGS"]

CLASSIFIER_POOLINGS = ("cls", "mean")  # config.json `classifier_pooling`; "cls" when absent


@dataclass
class SequenceClassifierOutput:
    """`logits` (B, num_labels), or (S, num_labels) for S packed sequences; `loss` with labels."""

    loss: torch.Tensor | None
    logits: torch.Tensor


def _problem_type_of_labels(config: ErnieConfig, labels: torch.Tensor) -> str:
    """transformers' rule, for a head built without a problem type."""
    if config.num_labels == 1:
        return "regression"
    if labels.dtype in (torch.long, torch.int, torch.int16, torch.int8, torch.uint8):
        return "single_label_classification"
    return "multi_label_classification"


def classification_loss(config: ErnieConfig, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """MSE / cross entropy / BCE by `config.problem_type` (when unset, inferred as transformers does)."""
    n = config.num_labels
    problem = config.problem_type or _problem_type_of_labels(config, labels)
    if problem == "regression":
        if n == 1:
            return F.mse_loss(logits.squeeze().float(), labels.squeeze().to(logits.dtype).float())
        return F.mse_loss(logits.float(), labels.to(logits.dtype).float())
    if problem == "single_label_classification":
        flat = labels.reshape(-1)
        if flat.numel() != logits.shape[0]:
            raise DataError(f"got {flat.numel()} labels for {logits.shape[0]} sequences; "
                            "give one class id per sequence")
        bad = flat[(flat != -100) & ((flat < 0) | (flat >= n))]
        if bad.numel():
            raise DataError(f"label {int(bad[0])} is outside the {n} classes [0, {n}) of this model; "
                            "set num_labels (or id2label) to the label set of your data")
        return F.cross_entropy(logits.view(-1, n).float(), flat.long())
    if problem == "multi_label_classification":
        if tuple(labels.shape) != tuple(logits.shape):
            raise DataError(f"multi-label targets have shape {tuple(labels.shape)}, logits "
                            f"{tuple(logits.shape)}; give one 0/1 value per label")
        return F.binary_cross_entropy_with_logits(logits.float(), labels.float())
    raise DataError(f"problem_type={problem!r} is not one of 'regression', "
                    "'single_label_classification', 'multi_label_classification'")


class ErnieForSequenceClassification(PreTrainedEncoder):
    """Backbone (with pooler) + dropout + `classifier` (H -> num_labels)."""

    _HF_SUFFIX = "ForSequenceClassification"
    # XLM-R's head (RobertaClassificationHead) is the same maths on the <s> token, tanh(dense(h))
    # then a linear, kept in the head instead of a backbone pooler: the names differ, not the
    # weights. (In training it also drops out h before the dense layer; at inference the two agree.)
    _XLMR_KEYS = {
        "backbone.pooler.weight": "head::classifier.dense.weight",
        "backbone.pooler.bias": "head::classifier.dense.bias",
        "classifier.weight": "head::classifier.out_proj.weight",
        "classifier.bias": "head::classifier.out_proj.bias",
    }

    def __init__(self, config: ErnieConfig) -> None:
        super().__init__(config)
        if config.problem_type is None and config.num_labels == 1:
            config.problem_type = "regression"  # what transformers' rule gives one label
        self.num_labels = config.num_labels
        self.pooling = config.extra.get("classifier_pooling", "cls")
        if self.pooling not in CLASSIFIER_POOLINGS:
            raise ConfigError(f"classifier_pooling={self.pooling!r}; valid: {', '.join(CLASSIFIER_POOLINGS)}")
        self.backbone = ErnieModel(config, add_pooling_layer=True)
        p = config.classifier_dropout
        self.dropout = Dropout(config.hidden_dropout_prob if p is None else p)
        self.classifier = nn.Linear(config.hidden_size, config.num_labels)
        self.post_init()

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                token_type_ids: torch.Tensor | None = None, task_type_ids: torch.Tensor | None = None,
                position_ids: torch.Tensor | None = None, pack_ids: torch.Tensor | None = None,
                labels: torch.Tensor | None = None) -> SequenceClassifierOutput:
        pooled = self.sentence_features(input_ids, attention_mask, token_type_ids, task_type_ids, position_ids,
                                        pack_ids)  # (B, H) or (S, H) packed
        logits = self.classifier(self.dropout(pooled))  # (B|S, num_labels)
        loss = None if labels is None else classification_loss(self.config, logits, labels)
        return SequenceClassifierOutput(loss=loss, logits=logits)

    def sentence_features(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                          token_type_ids: torch.Tensor | None = None, task_type_ids: torch.Tensor | None = None,
                          position_ids: torch.Tensor | None = None,
                          pack_ids: torch.Tensor | None = None) -> torch.Tensor:
        """(B, H) what the classifier reads: the pooler's output, or the mean over the tokens."""
        if self.pooling == "cls":
            return self.backbone.pooled_output(input_ids, attention_mask, token_type_ids, task_type_ids,
                                               position_ids, pack_ids)
        if pack_ids is not None:
            raise DataError("classifier_pooling=mean does not take packed rows; set train.data.batching: dynamic")
        hidden = self.backbone(input_ids, attention_mask, token_type_ids, task_type_ids,
                               position_ids).last_hidden_state  # (B, T, H)
        mask = (torch.ones_like(input_ids) if attention_mask is None else attention_mask).unsqueeze(-1).to(hidden.dtype)
        return (hidden * mask).sum(1) / mask.sum(1).clamp(min=1.0)  # (B, H)

    def _hf_key_map(self) -> dict[str, list[str]]:
        out = super()._hf_key_map()
        if self.config.model_type == "xlm-roberta":
            out.update({ours: [theirs] for ours, theirs in self._XLMR_KEYS.items()})
        return out
