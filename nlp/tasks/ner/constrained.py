"""Constrained Viterbi in O(T*K) for BIO / BIOES tag sets without a CRF (a fast path of
`nlp.tasks.ner.heads.decode_tags`).

Without a CRF, constrained decoding is Viterbi whose transition scores are only "allowed" (0) or
"forbidden" (-1e4) (`nlp.tasks.ner.heads._transition_rules`), which the general decoder
(`nlp.tasks.ner.crf.viterbi`) runs in O(T*K^2): every tag against every tag at every position.
The rules of these schemes have structure: a tag's allowed predecessors are either one set
shared by many tags (BIOES: ``B-*``, ``S-*`` and ``O`` may follow any ``E-*``, ``S-*`` or ``O``;
BIO: ``B-*`` and ``O`` may follow anything) or at most two tags (``I-y`` and ``E-y`` follow
``B-y`` or ``I-y``). So the best score into a tag is one max over the shared set (computed once
per position, not once per tag) or a max of two: O(K) per position. For the 168 tags of the
lexical task (B/I/E/S x 42 POS) that is ~100x less work.

It gives the general decoder's paths exactly, not approximately:
- the allowed scores are the general decoder's own numbers (an allowed transition adds -0.0,
  which changes no float), added in float32 like its, so every score is bit-identical;
- ties go to the lowest tag id, as ``torch.max`` and ``torch.argmax`` do;
- the general decoder could still pick a forbidden transition when every allowed path is worse
  by about 1e4 (its penalty is finite). At each position the fast path checks that the best
  forbidden score of the step (the highest score of any tag, minus 1e4, rounded as the general
  decoder rounds it) is below the worst best-allowed one; if a batch ever fails that check
  (emissions with a range of ~1e4, never log-probabilities of a trained model), it returns
  None and the caller runs the general decoder.
`tests/tasks/test_constrained_viterbi.py` compares the two on random, tied and real emissions.

Layout, for speed (every step is slices, not index lists): the tags are reordered once as
[openers | continuers] with the shared predecessors ("closers") contiguous across the boundary,
e.g. BIOES: [B | S O | E | I] with closers [S O | E]. Rows are ragged (one (n_i, K) array per
sequence), sorted longest first and packed position-major, so that the rows still running at
position t are a prefix of the batch and position t is one contiguous block: no padding.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["SparseRules", "structured_viterbi"]

# The general decoder's penalty for a forbidden transition (nlp.tasks.ner.heads._transition_rules)
_FORBIDDEN = np.float32(-1e4)


@dataclass(frozen=True)
class SparseRules:
    """Allowed transitions in the shape BIO/BIOES rules take, over the tags reordered by `order`
    (position -> tag id): positions [0, n_open) are the openers (their predecessors are exactly the
    closers, positions [c0, c1)); positions [n_open, K) the continuers, each with at most two
    predecessors, the positions `low` and `high` (`low` the lower tag id; the same when it has one).
    `start`/`end` (K,): the general decoder's start and end scores in this order (-0.0 allowed,
    -1e4 forbidden)."""

    order: np.ndarray
    n_open: int
    c0: int
    c1: int
    low: np.ndarray
    high: np.ndarray
    start: np.ndarray
    end: np.ndarray
    ties_by_id: bool  # the closer block lists its tags by ascending id: argmax breaks ties right

    @classmethod
    def from_scores(cls, transitions: np.ndarray, start: np.ndarray, end: np.ndarray) -> SparseRules | None:
        """From the general decoder's (transitions (K, K), start (K,), end (K,)) scores of 0 / -1e4,
        or None when the allowed sets do not have this shape (or a score is neither)."""
        transitions, start, end = (np.asarray(a, dtype=np.float32) for a in (transitions, start, end))
        if not all(np.isin(a, (0.0, _FORBIDDEN)).all() for a in (transitions, start, end)):
            return None
        preds = [np.flatnonzero(column) for column in (transitions == 0).T]  # allowed predecessors per tag
        if any(len(p) == 0 for p in preds):
            return None
        shared = [p for p in preds if len(p) > 2]
        closers = set(shared[0].tolist()) if shared else set()
        if any(set(p.tolist()) != closers for p in shared):
            return None
        K = len(preds)
        opener = [len(p) > 2 for p in preds]
        # [openers not closing | openers closing | continuers closing | continuers not closing]
        order = np.array(sorted(range(K), key=lambda j: (not opener[j], (j in closers) == opener[j], j)))
        place = np.argsort(order)  # tag id -> position
        n_open = sum(opener)
        c0 = n_open - sum(1 for j in closers if opener[j])
        continuers = order[n_open:]
        closer_ids = order[c0:c0 + len(closers)]
        return cls(
            order=order, n_open=n_open, c0=c0, c1=c0 + len(closers),
            low=place[[preds[j][0] for j in continuers]].astype(np.int64),
            high=place[[preds[j][-1] for j in continuers]].astype(np.int64),
            start=start[order], end=end[order], ties_by_id=bool(np.all(closer_ids[1:] > closer_ids[:-1])),
        )


def structured_viterbi(logp: np.ndarray, lengths: Sequence[int], rules: SparseRules) -> list[list[int]] | None:
    """The best allowed tag path of each sequence, equal to the general decoder's on the same rows;
    None when a step's check fails (see the module docstring): decode with the general decoder then.

    `logp` (N, K) float32: the log-probabilities of the sequences one after another, `lengths[i]`
    positions each."""
    lengths = np.asarray(lengths, dtype=np.int64)
    out: list[list[int]] = [[] for _ in lengths]
    rows = np.argsort(-lengths, kind="stable")  # longest first: the running rows are a prefix
    rows = rows[lengths[rows] > 0]
    if not len(rows):
        return out
    n = lengths[rows]
    running = (n[None, :] > np.arange(n[0])[:, None]).sum(1)  # (T,) rows still running at t
    starts = np.concatenate(([0], np.cumsum(lengths)[:-1]))[rows]
    packed = _pack(np.asarray(logp, dtype=np.float32), starts, running, rules.order)
    forward = _forward(packed, running, rules)
    if forward is None:
        return None
    final, back = forward
    path = _backtrace(final, back, running, rules)  # (N,) tag ids, position-major
    block = np.concatenate(([0], np.cumsum(running)))
    for j, row in enumerate(rows):
        out[row] = path[block[:n[j]] + j].tolist()
    return out


def _pack(logp: np.ndarray, starts: np.ndarray, running: np.ndarray, order: np.ndarray) -> np.ndarray:
    """(N, K): position 0 of every sequence (starting at `starts`, longest first), then position 1
    of those running, ..., the tags in `order`."""
    index = np.concatenate([starts[:a] + t for t, a in enumerate(running)])
    return np.take(logp[index], order, axis=1)


def _forward(packed: np.ndarray, running: np.ndarray,
             rules: SparseRules) -> tuple[np.ndarray, list[tuple[np.ndarray, np.ndarray]]] | None:
    """Each row's final scores (B, K) (end scores added) and, per position t >= 1, the choices
    that give each tag's best predecessor: the closer chosen (a_t,) and, per continuer, whether
    its `high` predecessor won (a_t, K - n_open)."""
    score = rules.start + packed[:running[0]]  # (B, K)
    back = []
    safe = True
    at = running[0]
    for t in range(1, len(running)):
        a = running[t]
        prev = score[:a]
        best, value = _first_max(prev[:, rules.c0:rules.c1], rules)  # (a,), (a,)
        low, high = prev[:, rules.low], prev[:, rules.high]  # (a, K_n)
        take_high = high > low  # ties to the lower id
        cont = np.maximum(low, high)
        # any forbidden candidate scores at most (the step's top score) - 1e4, rounded monotonically
        safe &= bool(np.all(prev.max(1) + _FORBIDDEN < np.minimum(value, cont.min(1))))
        em = packed[at:at + a]
        score[:a, :rules.n_open] = value[:, None] + em[:, :rules.n_open]
        score[:a, rules.n_open:] = cont + em[:, rules.n_open:]
        back.append((best, take_high))
        at += a
    return (score + rules.end, back) if safe else None


def _first_max(closing: np.ndarray, rules: SparseRules) -> tuple[np.ndarray, np.ndarray]:
    """Per row, the position (in the closer block) of its highest score, ties to the lowest tag id,
    and that score."""
    best = closing.argmax(1)
    top = closing[np.arange(len(closing)), best]
    if rules.ties_by_id:
        return best, top
    hits = closing == top[:, None]
    if np.count_nonzero(hits) > len(closing):  # a tie somewhere (rare): the lowest id wins it
        tied = np.flatnonzero(hits.sum(1) > 1)
        ids = rules.order[rules.c0:rules.c1]
        best[tied] = np.where(hits[tied], ids, np.iinfo(np.int64).max).argmin(1)
    return best, top


def _backtrace(final: np.ndarray, back: list[tuple[np.ndarray, np.ndarray]], running: np.ndarray,
               rules: SparseRules) -> np.ndarray:
    """The tag ids of every row's positions, packed as `_pack` packs them, from the last position
    down: a row joins when t is its last position, with its best final tag."""
    ids = np.empty_like(final)
    ids[:, rules.order] = final  # back to tag-id order, so that argmax breaks ties by id
    tag = np.argsort(rules.order)[ids.argmax(1)]  # (B,) positions
    block = np.concatenate(([0], np.cumsum(running)))
    path = np.empty(block[-1], dtype=np.int64)
    for t in range(len(running) - 1, -1, -1):
        a = running[t]
        path[block[t]:block[t] + a] = tag[:a]
        if t:
            tag[:a] = _predecessor(tag[:a], *back[t - 1], rules)
    return rules.order[path]


def _predecessor(tag: np.ndarray, best: np.ndarray, take_high: np.ndarray, rules: SparseRules) -> np.ndarray:
    """The positions of the tags before `tag` (positions) on each row's best path."""
    k = np.maximum(tag - rules.n_open, 0)  # the continuer index (0 for openers, unused)
    high = take_high[np.arange(len(tag)), k]
    cont = np.where(high, rules.high[k], rules.low[k])
    return np.where(tag < rules.n_open, rules.c0 + best, cont)
