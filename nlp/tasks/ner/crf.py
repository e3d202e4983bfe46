"""A linear-chain CRF over tag emissions: negative log-likelihood and Viterbi decoding.

Parameters (saved with the token-classification head as `crf.transitions` (L, L),
`crf.start_transitions` (L,) and `crf.end_transitions` (L,); `transitions[i, j]` scores tag i
followed by tag j). These are the only keys of a saved NER model that transformers does not
know: transformers' `ErnieForTokenClassification` loads such a directory, reports the three
`crf.*` keys as unused, and gives the same emissions (logits) without the CRF.

Positions are selected by a boolean mask that need not be contiguous: with first-sub-token
labelling, the labelled positions of a row are [1, 2, 4, 7, ...] (special tokens and later
sub-tokens are -100). The chain runs over the selected positions in order, i.e. over words,
which is what the tags describe; the rows are compacted (selected positions moved to the
front) before the forward algorithm and Viterbi.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
from torch import nn

from nlp._common import DataError

__all__ = ["LinearChainCRF", "CRF_KEYS", "crf_scores", "compact", "viterbi"]

# The CRF's parameters as the head saves them and as its `decoding_tensors()` hands them to a
# backend (and an export to its decoding file): decoding runs outside the network.
CRF_KEYS = ("crf.transitions", "crf.start_transitions", "crf.end_transitions")


def crf_scores(decoding: Mapping[str, Any]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None:
    """A model's decoding tensors (a backend's `decoding`: arrays or tensors by CRF_KEYS) as the
    float32 (transitions, start, end) that `viterbi` takes; None for a model without a CRF.
    DataError naming the missing keys when only some are there (a damaged export)."""
    have = [k for k in CRF_KEYS if k in decoding]
    if not have:
        return None
    if len(have) < len(CRF_KEYS):
        raise DataError(f"the model's decoding tensors have {have} but not "
                        f"{[k for k in CRF_KEYS if k not in decoding]}; export the model again")
    return tuple(torch.as_tensor(np.asarray(decoding[k], dtype=np.float32)) if not torch.is_tensor(decoding[k])
                 else decoding[k].float() for k in CRF_KEYS)


def compact(emissions: torch.Tensor, mask: torch.Tensor, tags: torch.Tensor | None = None):
    """Move each row's selected positions to the front, keeping their order.

    Returns (emissions (B, T, L), tags (B, T) or None, mask (B, T) with each row's True prefix).
    """
    T = mask.shape[1]
    # a stable sort on "not selected" puts selected positions first, in their original order
    order = torch.sort((~mask).to(torch.int8), dim=1, stable=True).indices  # (B, T)
    lengths = mask.sum(1)  # (B,)
    new_mask = torch.arange(T, device=mask.device)[None, :] < lengths[:, None]  # (B, T)
    em = emissions.gather(1, order[:, :, None].expand(-1, -1, emissions.shape[-1]))
    tg = None if tags is None else tags.gather(1, order).masked_fill(~new_mask, 0)
    return em, tg, new_mask


class LinearChainCRF(nn.Module):
    """CRF over `num_tags` tags (PaddleNLP's LinearChainCrf / torchcrf's CRF semantics)."""

    def __init__(self, num_tags: int) -> None:
        super().__init__()
        self.num_tags = num_tags
        self.transitions = nn.Parameter(torch.empty(num_tags, num_tags))
        self.start_transitions = nn.Parameter(torch.empty(num_tags))
        self.end_transitions = nn.Parameter(torch.empty(num_tags))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        # torchcrf's init; small values so the emissions dominate early in training
        for p in (self.transitions, self.start_transitions, self.end_transitions):
            nn.init.uniform_(p, -0.1, 0.1)

    def neg_log_likelihood(self, emissions: torch.Tensor, tags: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Mean over rows with at least one selected position of -log p(tags | emissions).

        emissions (B, T, L); tags (B, T) long; mask (B, T) bool, True where a tag counts.
        """
        em, tg, m = compact(emissions.float(), mask.bool(), tags.long())
        keep = m[:, 0]  # rows with no selected position contribute nothing
        if not bool(keep.any()):
            return emissions.sum() * 0.0  # keeps the graph, gives a zero gradient
        em, tg, m = em[keep], tg[keep], m[keep]
        return (self._log_partition(em, m) - self._score(em, tg, m)).mean()

    def _score(self, em: torch.Tensor, tags: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        T = em.shape[1]
        mf = mask.float()
        emit = em.gather(2, tags[:, :, None]).squeeze(2)  # (B, T)
        score = self.start_transitions[tags[:, 0]] + (emit * mf).sum(1)
        if T > 1:
            trans = self.transitions[tags[:, :-1], tags[:, 1:]]  # (B, T-1)
            score = score + (trans * mf[:, 1:]).sum(1)
        last = tags.gather(1, (mask.sum(1) - 1).clamp(min=0)[:, None]).squeeze(1)
        return score + self.end_transitions[last]

    def _log_partition(self, em: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        alpha = self.start_transitions + em[:, 0]  # (B, L)
        for t in range(1, em.shape[1]):
            nxt = torch.logsumexp(alpha[:, :, None] + self.transitions[None] + em[:, t, None, :], dim=1)
            alpha = torch.where(mask[:, t, None], nxt, alpha)
        return torch.logsumexp(alpha + self.end_transitions, dim=1)

    @torch.no_grad()
    def viterbi_decode(self, emissions: torch.Tensor, mask: torch.Tensor) -> list[list[int]]:
        """The best tag sequence of each row, one tag per selected position (in order)."""
        return viterbi(emissions, mask, self.transitions, self.start_transitions, self.end_transitions)


@torch.no_grad()
def viterbi(emissions: torch.Tensor, mask: torch.Tensor, transitions: torch.Tensor,
            start: torch.Tensor, end: torch.Tensor) -> list[list[int]]:
    """The highest-scoring tag path of each row over its selected positions (in order):
    score = start[first] + sum of emissions + sum of transitions[prev, next] + end[last].

    emissions (B, T, L); mask (B, T) bool; transitions (L, L); start, end (L,). A transition of
    -inf (or a large negative number) forbids it, which is how constrained decoding uses this."""
    em, _, m = compact(emissions.float(), mask.bool())
    B, T, _ = em.shape
    lengths = m.sum(1).tolist()
    if T == 0:
        return [[] for _ in range(B)]
    transitions, start, end = transitions.float(), start.float(), end.float()
    score = start + em[:, 0]  # (B, L)
    history = []
    for t in range(1, T):
        total = score[:, :, None] + transitions[None]  # (B, L_prev, L_next)
        best, idx = total.max(dim=1)  # (B, L)
        history.append(idx)
        score = torch.where(m[:, t, None], best + em[:, t], score)
    score = score + end
    # backtrace every row at once: row b's path ends at position n_b - 1 with its best final tag
    # and steps back through history while t < n_b (one gather per position, not per token)
    n = m.sum(1)  # (B,)
    paths = torch.zeros(B, T, dtype=torch.long, device=em.device)
    tag = score.argmax(-1)  # (B,)
    rows = torch.arange(B, device=em.device)
    paths[rows, (n - 1).clamp(min=0)] = tag
    for t in range(T - 1, 0, -1):
        prev = history[t - 1].gather(1, tag[:, None]).squeeze(1)  # (B,)
        inside = t < n
        tag = torch.where(inside, prev, tag)
        paths[:, t - 1] = torch.where(inside, tag, paths[:, t - 1])
    return [row[:k] for row, k in zip(paths.tolist(), lengths)]
