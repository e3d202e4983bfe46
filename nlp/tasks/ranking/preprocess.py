"""(query, passage) -> model rows ``[CLS] query [SEP] passage [SEP]``, for training and inference.

The query keeps at most `max_query_length` tokens (a query longer than that is cut at a token
boundary), so that a long query never leaves a passage no room. The passage fills the rest of
`max_length`. Training reads each passage's first window (`pair_rows`); inference reads every
window of a long passage (`pair_windows`: windows of the room left, overlapping by `stride`
tokens) and scores the passage by its best window (pipeline.py).
"""

from __future__ import annotations

from typing import Any, Sequence

from nlp._common import ConfigError, DataError

__all__ = ["cut_queries", "pair_rows", "pair_windows", "INPUTS"]

INPUTS = ("input_ids", "token_type_ids", "attention_mask")


def cut_queries(tokenizer: Any, queries: Sequence[str], max_query_length: int) -> list[str]:
    """Each query cut after its first `max_query_length` tokens (at the end of that token)."""
    enc = tokenizer(list(queries), add_special_tokens=False, return_offsets_mapping=True)
    out = []
    for q, ids, offsets in zip(queries, enc["input_ids"], enc["offset_mapping"]):
        out.append(q if len(ids) <= max_query_length else q[:offsets[max_query_length - 1][1]])
    return out


def _room_check(max_length: int, max_query_length: int) -> None:
    if max_query_length < 1 or max_length - max_query_length - 3 < 8:
        raise ConfigError(f"max_length={max_length} with max_query_length={max_query_length} leaves "
                          f"{max_length - max_query_length - 3} tokens for the passage; give max_query_length "
                          f"at most {max(1, max_length - 11)} (or a longer max_length)")


def pair_rows(tokenizer: Any, queries: Sequence[str], passages: Sequence[str], *, max_length: int,
              max_query_length: int) -> dict[str, list]:
    """One row per (query, passage): the passage's first window."""
    _room_check(max_length, max_query_length)
    if not passages:
        return {k: [] for k in INPUTS}
    enc = tokenizer(cut_queries(tokenizer, queries, max_query_length), list(passages), truncation="only_second",
                    max_length=max_length)
    return {k: list(enc[k]) for k in INPUTS if k in enc}


def pair_windows(tokenizer: Any, queries: Sequence[str], passages: Sequence[str], *, max_length: int,
                 max_query_length: int, stride: int | None = None,
                 truncate: bool = False) -> tuple[list[dict[str, list]], list[int]]:
    """(rows, owners): every window of every (query, passage) pair, `owners[r]` the pair of row
    r. `stride`: passage tokens shared by consecutive windows (default a quarter of the room).
    `truncate`: the first window of each passage only."""
    _room_check(max_length, max_query_length)
    if len(queries) != len(passages):
        raise DataError(f"{len(queries)} queries for {len(passages)} passages; give one query per passage")
    if not passages:
        return [], []
    cut = cut_queries(tokenizer, queries, max_query_length)
    longest_query = max(len(ids) for ids in tokenizer(cut, add_special_tokens=False)["input_ids"])
    room = max_length - longest_query - 3
    stride = max(1, room // 4) if stride is None else stride
    if not 0 <= stride < room:
        raise ConfigError(f"stride={stride} must be in [0, {room}) (the passage room of max_length={max_length} "
                          f"after a query of {longest_query} tokens)")
    enc = tokenizer(cut, list(passages), truncation="only_second", max_length=max_length, stride=stride,
                    return_overflowing_tokens=not truncate)
    n = len(enc["input_ids"])
    owners = list(enc["overflow_to_sample_mapping"]) if not truncate else list(range(n))
    rows = [{k: enc[k][r] for k in INPUTS if k in enc} for r in range(n)]
    return rows, [int(o) for o in owners]
