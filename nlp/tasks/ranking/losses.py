"""The reranker's training losses, over groups of (B, G) scores with (B, G) relevance labels
(1 for the positive, 0 for the negatives; graded relevance in [0, 1] works too).

- "listwise": softmax cross-entropy over each group (the positive against its negatives), the
  loss rerankers such as bge-reranker train with; the target is the group's relevance
  normalised to sum to one.
- "pointwise": binary cross-entropy of each (query, passage) score against its label, as
  sentence-transformers' CrossEncoder trains by default; the scores then read as
  probabilities after a sigmoid.

`RANKING_LOSSES` maps the names (the recipe's `task.ranking_loss`) to the functions.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from nlp._common import DataError

__all__ = ["listwise_loss", "pointwise_loss", "RANKING_LOSSES"]


def _check(scores: torch.Tensor, labels: torch.Tensor) -> None:
    if tuple(scores.shape) != tuple(labels.shape):
        raise DataError(f"ranking labels of shape {tuple(labels.shape)} for scores of shape {tuple(scores.shape)}; "
                        "give one relevance (1 positive, 0 negative) per passage of each group")


def listwise_loss(scores: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mean over groups of -sum(target * log_softmax(scores)); target = labels / labels.sum()."""
    _check(scores, labels)
    if scores.dim() != 2 or scores.shape[1] < 2:
        raise DataError(f"the listwise loss needs groups of two or more passages, got scores {tuple(scores.shape)}; "
                        "give each query negatives, or set task.ranking_loss: pointwise")
    target = labels.float()
    total = target.sum(-1, keepdim=True)
    if bool((total <= 0).any()):
        raise DataError("a group has no relevant passage (every label 0); the listwise loss needs one per group")
    return -(target / total * F.log_softmax(scores.float(), dim=-1)).sum(-1).mean()


def pointwise_loss(scores: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Binary cross-entropy with logits over every (query, passage) score."""
    _check(scores, labels)
    return F.binary_cross_entropy_with_logits(scores.float(), labels.float())


RANKING_LOSSES = {"listwise": listwise_loss, "pointwise": pointwise_loss}
