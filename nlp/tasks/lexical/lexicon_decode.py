"""Constrained decoding of B/I/E/S x POS tags with a word lexicon's bonus (nlp/tasks/lexical/lexicon.py).

Without a lexicon the best well-formed tag path maximises the sum of the characters'
log-probabilities (nlp/tasks/ner/constrained.py). With one, a path that reads a lexicon span
``text[i:j]`` as one word (B I.. E of one POS) gains that span's bonus. That is a semi-Markov
model (a score per word, not per tag) whose words of any length are the tagger's and whose
lexicon words carry a bonus. It is decoded exactly, in O(T*K + matches):

- `boundary[t]`: the best score of the characters before t, ending a word at t. It is the best
  of the tag path closing a word at t - 1 (E-p or S-p), and of every lexicon span ``[i, t)``:
  ``boundary[i] + span_score(i, t) + bonus``, where span_score is the best POS's B I.. E sum;
- B-p and S-p at t start from `boundary[t]`; I-p and E-p continue B-p or I-p at t - 1.

With no lexicon span in a text the paths are those of the plain constrained decoder (ties
apart). Layout, for speed: every span is scored at once from prefix sums over all rows; rows are
decoded in groups, longest first and packed position-major (as in nlp/tasks/ner/constrained.py:
the rows still running at t are a prefix, position t one contiguous block, no padding). The path
scores of a position are one (rows, 4P) array laid out [B | S | E | I] by POS, so the openers B, S
are the first half and the closers S, E (those that end a word) the middle half.
`tests/tasks/test_lexicon.py` checks the decoder against a brute-force search over every
segmentation.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["LexicalTagIndex", "decode_with_lexicon"]

_GROUP_POSITIONS = 32768  # positions decoded together
_NEG = np.float32(-np.inf)


@dataclass(frozen=True)
class LexicalTagIndex:
    """The label ids of B-, I-, E- and S-p for each POS p (arrays of the same order)."""

    B: np.ndarray
    I: np.ndarray  # noqa: E741 (the tag's name)
    E: np.ndarray
    S: np.ndarray

    @classmethod
    def of(cls, names: Sequence[str]) -> LexicalTagIndex | None:
        """From the label names in id order; None unless every POS has all four tags."""
        ids = {name: i for i, name in enumerate(names)}
        pos = list(dict.fromkeys(n[2:] for n in names))
        try:
            return cls(*(np.array([ids[f"{prefix}-{p}"] for p in pos], dtype=np.int64) for prefix in "BIES"))
        except KeyError:
            return None


def decode_with_lexicon(logp: np.ndarray, lengths: Sequence[int],
                        matches: Sequence[tuple[np.ndarray, np.ndarray, np.ndarray]],
                        tags: LexicalTagIndex) -> list[list[int]]:
    """The best tag ids of each row. `logp` (N, K): the log-probabilities of the rows one after
    another, `lengths[r]` positions each; `matches[r]` the lexicon spans of row r as (starts,
    ends, bonuses), positions in the row."""
    lengths = np.asarray(lengths, dtype=np.int64)
    logp = np.asarray(logp, dtype=np.float32)
    if len(matches) != len(lengths) or logp.shape[0] != lengths.sum():
        raise ValueError(f"{len(lengths)} rows of {int(lengths.sum())} positions in all, {logp.shape[0]} rows of "
                         f"scores and {len(matches)} lists of matches: give one list of matches per row")
    out: list[list[int]] = [[] for _ in lengths]
    offsets = np.concatenate(([0], np.cumsum(lengths)[:-1]))  # each row's first position in logp
    spans = _Spans.of(logp, lengths, offsets, matches, tags)
    order = [int(r) for r in np.argsort(-lengths, kind="stable") if lengths[r] > 0]
    # the columns in the order B I E S per POS (the lexical labels' own order: then no gather)
    columns = np.stack((tags.B, tags.I, tags.E, tags.S), axis=1).ravel()
    if np.array_equal(columns, np.arange(logp.shape[1])):
        columns = None
    group: list[int] = []
    size = 0
    for r in order:
        if group and size + lengths[r] > _GROUP_POSITIONS:
            _decode_group(group, logp, lengths, offsets, columns, spans, tags, out)
            group, size = [], 0
        group.append(r)
        size += int(lengths[r])
    if group:
        _decode_group(group, logp, lengths, offsets, columns, spans, tags, out)
    return out


@dataclass
class _Spans:
    """Every lexicon span: row, start, end, score (bonus + the best POS's B I.. E sum) and that POS."""

    row: np.ndarray
    start: np.ndarray
    end: np.ndarray
    score: np.ndarray
    pos: np.ndarray

    @classmethod
    def of(cls, logp: np.ndarray, lengths: np.ndarray, offsets: np.ndarray,
           matches: Sequence[tuple[np.ndarray, ...]], tags: LexicalTagIndex) -> _Spans:
        row = np.repeat(np.arange(len(matches)), [len(m[0]) for m in matches])
        start, end, bonus = (np.concatenate([np.asarray(m[k]) for m in matches]) if matches else np.zeros(0)
                             for k in range(3))
        start, end = start.astype(np.int64), end.astype(np.int64)
        ok = (start >= 0) & (end - start >= 2) & (end <= lengths[row])
        row, start, end, bonus = row[ok], start[ok], end[ok], bonus[ok].astype(np.float32)
        if not len(row):
            return cls(row, start, end, np.zeros(0, dtype=np.float32), np.zeros(0, dtype=np.int64))
        first = offsets[row] + start  # flat position of B
        size = end - start
        total = logp[first][:, tags.B] + logp[first + size - 1][:, tags.E]
        for k in range(1, int(size.max()) - 1):  # the I's inside, k after B (most words are short)
            longer = np.flatnonzero(size > k + 1)
            total[longer] += logp[first[longer] + k][:, tags.I]
        pos = total.argmax(1)
        return cls(row, start, end, total[np.arange(len(row)), pos] + bonus, pos)


def _decode_group(rows: list[int], logp: np.ndarray, lengths: np.ndarray, offsets: np.ndarray,
                  columns: np.ndarray | None, spans: _Spans, tags: LexicalTagIndex, out: list[list[int]]) -> None:
    """One group of rows, longest first."""
    R, P = len(rows), len(tags.B)
    n = lengths[rows]
    T = int(n[0])
    running = (n[None, :] > np.arange(T)[:, None]).sum(1)  # (T,) rows still running at t
    index = np.concatenate([offsets[rows[:a]] + t for t, a in enumerate(running)])
    packed = logp[index] if columns is None else logp[index[:, None], columns]  # (positions, 4P): B I E S per POS
    block = np.concatenate(([0], np.cumsum(running)))
    # the group's spans by end position, rows numbered within the group
    where = np.full(len(lengths), -1, dtype=np.int64)
    where[rows] = np.arange(R)
    mine = np.flatnonzero(where[spans.row] >= 0)
    mine = mine[np.argsort(spans.end[mine], kind="stable")]
    g_of, start_of, score_of = where[spans.row[mine]], spans.start[mine], spans.score[mine]
    by_end = np.searchsorted(spans.end[mine], np.arange(T + 2))
    boundary = np.full((T + 1, R), _NEG, dtype=np.float32)
    boundary[0] = 0
    closer = np.zeros((T + 1, R), dtype=np.int64)  # the tag that ends the word ending at t: S-p (p) or E-p (P + p)
    jump = np.full((T + 1, R), -1, dtype=np.int64)  # the span (index into spans) ending at t on the best path, or -1
    from_i = np.zeros((T, R, P), dtype=bool)  # E-p / I-p at t continues I-p (True) or B-p (False)
    prev = np.empty((0, 4 * P), dtype=np.float32)
    for t in range(T):
        a = int(running[t])
        em = packed[block[t]:block[t + 1]].reshape(a, P, 4)
        now = np.empty((a, 4 * P), dtype=np.float32)
        np.add(boundary[t, :a, None], em[:, :, 0], out=now[:, :P])
        np.add(boundary[t, :a, None], em[:, :, 3], out=now[:, P:2 * P])
        if t == 0:
            now[:, 2 * P:] = _NEG
        else:
            b_prev, i_prev = prev[:a, :P], prev[:a, 3 * P:]
            from_i[t, :a] = i_prev > b_prev  # ties to B
            inside = np.maximum(b_prev, i_prev)
            np.add(inside, em[:, :, 2], out=now[:, 2 * P:3 * P])
            np.add(inside, em[:, :, 1], out=now[:, 3 * P:])
        closing = now[:, P:3 * P]
        best = closing.argmax(1)
        closer[t + 1, :a] = best
        boundary[t + 1, :a] = np.take_along_axis(closing, best[:, None], 1)[:, 0]
        lo, hi = by_end[t + 1], by_end[t + 2]
        if lo < hi:  # lexicon spans ending at t + 1: where one beats the boundary, take it (the first of equals)
            g, cand = g_of[lo:hi], boundary[start_of[lo:hi], g_of[lo:hi]] + score_of[lo:hi]
            top = boundary[t + 1].copy()
            np.maximum.at(top, g, cand)
            won = np.flatnonzero((cand == top[g]) & (cand > boundary[t + 1, g]))
            won = won[np.unique(g[won], return_index=True)[1]]  # one per row: its first
            jump[t + 1, g[won]] = mine[lo + won]
            boundary[t + 1] = top
        prev = now
    ids = tuple(x.tolist() for x in (tags.B, tags.I, tags.E, tags.S))
    for j, (r, closer_j, jump_j) in enumerate(zip(rows, closer.T.tolist(), jump.T.tolist())):
        out[r] = _backtrace(int(n[j]), closer_j, jump_j, from_i[:, j], spans, ids, P)


def _backtrace(n: int, closer: list[int], jump: list[int], from_i: np.ndarray, spans: _Spans,
               ids: tuple[list[int], ...], P: int) -> list[int]:
    """One row's tag ids, from its last boundary back: a lexicon span's B I.. E at once, else the
    closing tag and, for E, back through its I's to its B. `closer`, `jump` (T + 1,) and
    `from_i` (T, P) are the row's columns of the group's arrays; `ids` the B, I, E, S label ids."""
    B, I, E, S = ids  # noqa: E741 (the tags' names)
    path = [0] * n
    t = n  # a boundary: the word before t ends at t - 1
    while t > 0:
        m = jump[t]
        if m >= 0:
            i, p = int(spans.start[m]), int(spans.pos[m])
            path[i:t] = [B[p]] + [I[p]] * (t - i - 2) + [E[p]]
            t = i
            continue
        c = closer[t]
        if c < P:  # S-p
            path[t - 1] = S[c]
            t -= 1
            continue
        p, k = c - P, t - 1
        path[k] = E[p]
        while from_i[k, p]:  # back through I-p to B-p
            k -= 1
            path[k] = I[p]
        path[k - 1] = B[p]
        t = k - 1
    return path
