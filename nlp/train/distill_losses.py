"""The losses of knowledge distillation (nlp/train/distill.py), as functions of tensors.

- `soft_loss`: the student's outputs against the teacher's (Hinton et al. 2015: KL at a
  temperature, times temperature^2; per-label BCE; MSE), by the kind the task spec names.
- `hidden_loss`: MSE of (projected) student hidden states against the teacher's (TinyBERT's
  hidden-state loss, Jiao et al. 2020), over the real tokens.
- `relation_loss`: MiniLM v2's self-attention relations (Wang et al. 2021, "MiniLMv2:
  Multi-Head Self-Attention Relation Distillation for Compressing Pretrained Transformers"):
  for each of queries, keys and values, the scaled dot-product relation
  softmax(X_r X_r^T / sqrt(d_r)) of every relation head r, KL(teacher || student), summed over
  the relation kinds and averaged over the relation heads and the real query tokens. Splitting
  both models' vectors into the same number of relation heads makes the relation matrices the
  same shape (T x T) whatever the widths and attention head counts.
- `in_batch_ranking_kl`: sentence embeddings of retrieval records (query, positive[, negatives]):
  each query's softmax over every candidate text of the batch (the positives and negatives of
  all its records) by cosine, KL(teacher || student), each model's cosines at its own
  temperature (as TAS-B's in-batch distillation of a teacher's ranking, Hofstaetter et al. 2021).
  Regressing the vectors (MSE) leaves a student near its teacher's directions but not its ranking.

Padding: a padded token is neither a query that is counted nor a key that takes probability.
"""

from __future__ import annotations

import math
from typing import Sequence

import torch
import torch.nn.functional as F

__all__ = ["soft_loss", "hidden_loss", "relation_loss", "in_batch_ranking_kl", "split_qkv", "RELATIONS"]

_MASKED = -1e4  # a padded position's logit in a distribution over positions (soft_loss)
_NO_KEY = -1e9  # a padded key's relation score: softmax gives it exactly 0 in float32
RELATIONS = ("query", "key", "value")  # the relation kinds, in the order of the fused qkv rows


def soft_loss(student: torch.Tensor, teacher: torch.Tensor, kind: str, temperature: float,
              mask: torch.Tensor | None) -> torch.Tensor:
    """The loss of the student's output against the teacher's, by `kind` (TaskSpec.distill_targets):
    "softmax" KL(teacher || student) at `temperature`, times temperature^2; "sigmoid" binary
    cross-entropy against the teacher's probabilities; "mse". A (B, T, ...) output is averaged over
    the real positions of `mask` (B, T); a (B, T) distribution over positions masks the padding."""
    student = student.float()
    teacher = teacher.float()
    if student.shape != teacher.shape:
        raise ValueError(f"the student's output has shape {tuple(student.shape)}, the teacher's cached one "
                         f"{tuple(teacher.shape)}: they must match (same task, labels and tokenizer)")
    if kind == "mse":
        return F.mse_loss(student, teacher)
    over_positions = mask is not None and student.dim() == 2 and student.shape == mask.shape
    if over_positions:  # QA: a distribution over the sequence; padding takes no probability
        keep = mask.bool()
        student = student.masked_fill(~keep, _MASKED)
        teacher = teacher.masked_fill(~keep, _MASKED)
    if kind == "sigmoid":
        per = F.binary_cross_entropy_with_logits(student / temperature, torch.sigmoid(teacher / temperature),
                                                 reduction="none") * temperature ** 2
        per = per.mean(-1)
    elif kind == "softmax":
        log_p = F.log_softmax(student / temperature, dim=-1)
        q = F.softmax(teacher / temperature, dim=-1)
        per = (q * (torch.log(q.clamp_min(1e-12)) - log_p)).sum(-1) * temperature ** 2
    else:
        raise ValueError(f"unknown distillation target kind {kind!r}; valid: softmax, sigmoid, mse")
    # per: (B,) or (B, T) for a per-token output
    if per.dim() == 2 and mask is not None and per.shape == mask.shape:
        weights = mask.to(per.dtype)
        return (per * weights).sum() / weights.sum().clamp_min(1.0)
    return per.mean()


def hidden_loss(student: torch.Tensor, teacher: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """MSE between (projected) student and teacher hidden states, over real tokens when the
    states are per token (B, T, H), else over every row (a [CLS]-rows last layer, (N, H))."""
    if student.shape != teacher.shape:
        raise ValueError(f"hidden states differ in shape: student {tuple(student.shape)} (projected), teacher "
                         f"{tuple(teacher.shape)}")
    per = ((student.float() - teacher.float()) ** 2).mean(-1)
    if mask is not None and mask.numel() == per.numel() and per.dim() >= 2:  # grouped rows (B, C, T): (B*C, T)
        mask = mask.reshape(per.shape)
    if mask is not None and per.shape == mask.shape:
        w = mask.to(per.dtype)
        return (per * w).sum() / w.sum().clamp_min(1.0)
    return per.mean()


def split_qkv(qkv: torch.Tensor) -> dict[str, torch.Tensor]:
    """A fused projection's output (..., 3H), rows q; k; v (ErnieLayer.qkv) -> {query, key, value}."""
    return dict(zip(RELATIONS, qkv.chunk(3, dim=-1)))


def _log_relation(x: torch.Tensor, heads: int, keys: torch.Tensor | None) -> torch.Tensor:
    """log softmax(X_r X_r^T / sqrt(d_r)) per relation head: x (B, T, H) -> (B, heads, T, T)."""
    B, T, H = x.shape
    d = H // heads
    x = x.float().view(B, T, heads, d).transpose(1, 2)  # (B, R, T, d)
    scores = x @ x.transpose(-1, -2) / math.sqrt(d)  # (B, R, T, T)
    if keys is not None:
        scores = scores.masked_fill(~keys[:, None, None, :], _NO_KEY)  # padded keys take no probability
    return F.log_softmax(scores, dim=-1)


def relation_loss(student: dict[str, torch.Tensor], teacher: dict[str, torch.Tensor], mask: torch.Tensor | None,
                  heads: int, relations: Sequence[str] = RELATIONS) -> torch.Tensor:
    """MiniLM v2's relation loss: for each kind in `relations` ("query", "key", "value"),
    KL(teacher's relation || student's) with both split into `heads` relation heads, averaged over
    the heads and the real query tokens of `mask` (B, T); the kinds' losses are summed (as the
    paper sums Q-Q, K-K and V-V). `student[kind]` is (B, T, H_s), `teacher[kind]` (B, T, H_t): the
    widths may differ, each must divide by `heads`."""
    total = None
    for kind in relations:
        s, t = student[kind], teacher[kind]
        if s.shape[:2] != t.shape[:2]:
            raise ValueError(f"relation {kind}: the student's tokens {tuple(s.shape[:2])} and the teacher's "
                             f"{tuple(t.shape[:2])} differ; they must see the same batch")
        for name, x in (("student", s), ("teacher", t)):
            if x.shape[-1] % heads:
                raise ValueError(f"relation {kind}: the {name}'s width {x.shape[-1]} does not divide into {heads} "
                                 "relation heads")
        keys = None if mask is None else mask.reshape(s.shape[:2]).bool()
        log_s, log_t = _log_relation(s, heads, keys), _log_relation(t, heads, keys)
        per = (log_t.exp() * (log_t - log_s)).sum(-1)  # (B, R, T): KL per query row
        if keys is None:
            loss = per.mean()
        else:
            w = keys[:, None, :].to(per.dtype).expand_as(per)
            loss = (per * w).sum() / w.sum().clamp_min(1.0)
        total = loss if total is None else total + loss
    if total is None:
        raise ValueError("relation_loss needs at least one relation kind (query, key, value)")
    return total


def in_batch_ranking_kl(student: torch.Tensor, teacher: torch.Tensor, student_temperature: float,
                        teacher_temperature: float) -> torch.Tensor:
    """KL(teacher || student) of each query's distribution over the batch's candidates: `student`
    and `teacher` are (B, K, H) vectors of B records of K texts, the query first; the candidates
    are the other B * (K - 1) texts, scored by cosine / temperature (so the widths may differ).
    0 for records of one text."""
    if student.dim() != 3 or teacher.dim() != 3 or student.shape[:2] != teacher.shape[:2]:
        raise ValueError(f"in_batch_ranking_kl takes (batch, texts, width) vectors of the same batch and texts, "
                         f"got {tuple(student.shape)} and {tuple(teacher.shape)}")
    B, K = student.shape[:2]
    if K < 2:
        return student.new_zeros(())

    def scores(v: torch.Tensor, temperature: float) -> torch.Tensor:
        v = F.normalize(v.float(), dim=-1)
        return v[:, 0] @ v[:, 1:].reshape(B * (K - 1), -1).T / temperature

    return F.kl_div(F.log_softmax(scores(student, student_temperature), dim=-1),
                    F.log_softmax(scores(teacher.detach(), teacher_temperature), dim=-1),
                    log_target=True, reduction="batchmean")
