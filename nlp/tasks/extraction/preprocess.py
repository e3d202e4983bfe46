"""(prompt, text) pairs -> model rows `[CLS] prompt [SEP] window of the text [SEP]`, with each
text token's character offsets into the caller's text, and (for training) the pointer labels.

A text is tokenized once however many prompts ask about it, and each prompt once however many
texts it is asked of: a row is built from the pieces. A text longer than one row's room is cut
into windows that overlap by `doc_stride` tokens (at most half the room), so a span shorter than
the overlap lies whole inside some window even when a window boundary cuts it elsewhere; the
decoding merges the windows' spans by their character offsets.

Offsets are the tokenizer's: character (code point) offsets into the text given, whatever the
tokenizer normalizes (full-width letters, accents) or makes [UNK] of (an emoji keeps its one
character).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from nlp._common import DataError

__all__ = ["Row", "TextTokens", "encode_texts", "encode_prompts", "build_rows", "span_labels", "prompt_room"]


@dataclass
class TextTokens:
    """A text's token ids (no special tokens) and their (start, end) character offsets."""

    ids: list[int]
    offsets: list[tuple[int, int]]


@dataclass
class Row:
    """One model row: `pair` is the index of its (prompt, text) pair; `offsets[k]` the character
    span of token k in the text, None for [CLS], the prompt and [SEP]."""

    pair: int
    input_ids: list[int]
    token_type_ids: list[int]
    offsets: list[tuple[int, int] | None]

    def features(self) -> dict[str, list[int]]:
        return {"input_ids": self.input_ids, "token_type_ids": self.token_type_ids,
                "attention_mask": [1] * len(self.input_ids)}


def prompt_room(max_length: int) -> int:
    """The most tokens a prompt may take in a row of `max_length`: half of it, so that a chained
    prompt ("<a long span>的<role>") never leaves the text no room."""
    return max(1, max_length // 2 - 2)


def encode_texts(tokenizer: Any, texts: Sequence[str]) -> list[TextTokens]:
    if not texts:
        return []
    enc = tokenizer(list(texts), add_special_tokens=False, return_offsets_mapping=True)
    return [TextTokens(list(ids), [tuple(o) for o in offs]) for ids, offs in zip(enc["input_ids"], enc["offset_mapping"])]


def encode_prompts(tokenizer: Any, prompts: Sequence[str], max_length: int) -> list[list[int]]:
    if not prompts:
        return []
    room = prompt_room(max_length)
    return [list(ids[:room]) for ids in tokenizer(list(prompts), add_special_tokens=False)["input_ids"]]


def build_rows(tokenizer: Any, prompt_ids: Sequence[list[int]], text_tokens: Sequence[TextTokens],
               pairs: Sequence[tuple[int, int]], max_length: int, doc_stride: int) -> list[Row]:
    """The rows of each (prompt index, text index) pair, in pair order; a text with no tokens
    gives no row."""
    if max_length < 8:
        raise DataError(f"max_length={max_length} leaves no room for a prompt and a text; give at least 8")
    cls, sep = tokenizer.cls_token_id, tokenizer.sep_token_id
    rows: list[Row] = []
    for k, (p, t) in enumerate(pairs):
        prompt, text = prompt_ids[p], text_tokens[t]
        head = [cls, *prompt, sep]
        room = max_length - len(head) - 1
        overlap = max(0, min(doc_stride, room // 2))
        n = len(text.ids)
        start = 0
        while start < n:
            end = min(n, start + room)
            ids = head + text.ids[start:end] + [sep]
            types = [0] * len(head) + [1] * (end - start + 1)
            offs: list[tuple[int, int] | None] = [None] * len(head) + list(text.offsets[start:end]) + [None]
            rows.append(Row(k, ids, types, offs))
            if end == n:
                break
            start = end - overlap
    return rows


def span_labels(row: Row, spans: Sequence[tuple[int, int]]) -> tuple[list[int], list[int], int]:
    """0/1 start and end labels of a row for gold character spans [start, end); a span lies in
    the row when its characters are all in the row's window (else it is left to the window that
    holds it). Returns the labels and how many spans the row holds."""
    start_l = [0] * len(row.input_ids)
    end_l = [0] * len(row.input_ids)
    text_pos = [i for i, o in enumerate(row.offsets) if o is not None]
    if not text_pos:
        return start_l, end_l, 0
    lo, hi = row.offsets[text_pos[0]][0], row.offsets[text_pos[-1]][1]
    held = 0
    for s, e in spans:
        if s < lo or e > hi:
            continue
        first = next((i for i in text_pos if row.offsets[i][1] > s), None)
        last = next((i for i in reversed(text_pos) if row.offsets[i][0] < e), None)
        if first is None or last is None or last < first:
            continue  # the span is white space between tokens
        start_l[first] = 1
        end_l[last] = 1
        held += 1
    return start_l, end_l, held
