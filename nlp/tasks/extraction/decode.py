"""Pointer probabilities -> spans, as UIE decodes them (PaddleNLP `get_bool_ids_greater_than`,
`get_span`, `get_id_and_prob`): the tokens whose start (end) probability passes `position_prob`
are candidates; walking them in position order, each start pairs with the first end at or after
it, and of several starts before one end the last one wins (spans do not nest). A span's
probability is its start's times its end's. Only text tokens are candidates (never [CLS], the
prompt or [SEP]); the spans of every window of a (prompt, text) pair are merged by their
character offsets, the higher probability kept.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

__all__ = ["pair_pointers", "row_spans", "merge_spans"]


def pair_pointers(starts: Sequence[tuple[int, float]], ends: Sequence[tuple[int, float]]
                  ) -> list[tuple[tuple[int, float], tuple[int, float]]]:
    """UIE's `get_span`: (start, end) token pairs from the candidates, each (position, prob)."""
    starts, ends = sorted(starts), sorted(ends)
    i = j = 0
    couples: dict[tuple[int, float], tuple[int, float]] = {}
    while i < len(starts) and j < len(ends):
        if starts[i][0] <= ends[j][0]:
            couples[ends[j]] = starts[i]
            i += 1
            if starts[i - 1][0] == ends[j][0]:
                j += 1
        else:
            j += 1
    return sorted((s, e) for e, s in couples.items())


def row_spans(start_prob: np.ndarray, end_prob: np.ndarray, offsets: Sequence[tuple[int, int] | None],
              threshold: float) -> list[tuple[int, int, float]]:
    """(char start, char end, probability) of one row's spans."""
    n = min(len(offsets), len(start_prob))
    starts = [(k, float(start_prob[k])) for k in range(n) if offsets[k] is not None and start_prob[k] > threshold]
    ends = [(k, float(end_prob[k])) for k in range(n) if offsets[k] is not None and end_prob[k] > threshold]
    out = []
    for (s, ps), (e, pe) in pair_pointers(starts, ends):
        out.append((offsets[s][0], offsets[e][1], ps * pe))
    return out


def merge_spans(found: Iterable[tuple[int, int, float]]) -> list[tuple[int, int, float]]:
    """Spans of several windows, one per character span (the highest probability), in text order."""
    best: dict[tuple[int, int], float] = {}
    for s, e, p in found:
        if p > best.get((s, e), -1.0):
            best[(s, e)] = p
    return [(s, e, p) for (s, e), p in sorted(best.items())]
