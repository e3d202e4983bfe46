"""Correction features: (source, target) -> tokens of the source's characters, labels, char ids.

The source is read character by character, each visible (non-space) character one word, as the
NER and lexical pipelines read text (`nlp.tasks.ner.preprocess.visible_characters`), so the
features of training and of the pipeline are the same rows. At each character's first token:

- `labels`: the token id of the target's character where the source's character is one the task
  may change (`correctable`: a Chinese character the tokenizer knows) and the target's character is
  a Chinese character with a token of its own; the source's own id otherwise (a character that is
  left as it is); -100 at special tokens, later sub-tokens, and characters past `max_length`;
- `char_ids`: the character's offset in the source where it is correctable, else -1. Scoring
  maps each prediction back to its character through it. A pair whose texts differ in length
  (scored at sentence level only) has its own ids as labels.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from nlp.tasks.correction.resources import is_chinese_char
from nlp.tasks.ner.preprocess import visible_characters
from nlp.tokenizer import Tokenizer

__all__ = ["preprocess_correction", "char_token_ids"]


def char_token_ids(tokenizer: Tokenizer, chars: Sequence[str]) -> dict[str, int | None]:
    """Each character's token id, or None where the tokenizer makes it anything but one known
    token (several pieces, [UNK], nothing)."""
    unique = list(dict.fromkeys(chars))
    if not unique:
        return {}
    pieces = tokenizer([[c] for c in unique], is_split_into_words=True, unspaced_words=True,
                       add_special_tokens=False)["input_ids"]
    unk = tokenizer.unk_token_id
    return {c: (p[0] if len(p) == 1 and p[0] != unk else None) for c, p in zip(unique, pieces)}


def preprocess_correction(columns: Mapping[str, Sequence[Any]], tokenizer: Tokenizer, *,
                          max_length: int) -> dict[str, list]:
    sources, targets = list(columns["source"]), list(columns.get("target") or columns["source"])
    words = [visible_characters(s) for s in sources]
    enc = tokenizer([w for _, w in words], is_split_into_words=True, unspaced_words=True, truncation=True,
                    max_length=max_length)
    ids_of = char_token_ids(tokenizer, [c for s, t in zip(sources, targets) for c in s + t if is_chinese_char(c)])
    out: dict[str, list] = {k: list(enc[k]) for k in ("input_ids", "token_type_ids", "attention_mask") if k in enc}
    out["labels"], out["char_ids"] = [], []
    for r, (src, tgt, (offsets, _)) in enumerate(zip(sources, targets, words)):
        same_length = len(src) == len(tgt)
        labels, char_ids, prev = [], [], None
        for t, (w, tok) in enumerate(zip(enc.word_ids(r), out["input_ids"][r])):
            if w is None or w == prev:
                labels.append(-100)
                char_ids.append(-1)
            else:
                at = offsets[w]
                mine = ids_of.get(src[at]) if is_chinese_char(src[at]) else None
                right = ids_of.get(tgt[at]) if same_length and is_chinese_char(tgt[at]) else None
                fixable = mine is not None and mine == tok
                labels.append(right if fixable and right is not None else tok)
                char_ids.append(at if fixable else -1)
            prev = w
        out["labels"].append(labels)
        out["char_ids"].append(char_ids)
    return out
