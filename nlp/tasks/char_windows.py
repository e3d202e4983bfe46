"""The model rows of character-level pipelines (NER, lexical analysis): each visible character of
a text is one word, tokenized with `is_split_into_words=True, unspaced_words=True` (no word-start
mark before each character: nlp/tokenizer/unigram.py); a text longer than a window runs as
overlapping windows.

    cache = TokenCache(tokenizer)   # kept by the pipeline
    rows = CharacterRows.of(tokenizer, [["张", "三"], ["北", "京"]], max_length=128, stride=32, cache=cache)
    rows.features[r]   # {"input_ids", "token_type_ids", "attention_mask"} of row r
    rows.text[r]       # the text (index into the list) row r belongs to
    rows.word_ids[r]   # per token: the character it comes from, -1 for special tokens
    rows.windows()[r]  # the characters row r tags: their first tokens, and how central each is

The tokenizer encodes each pre-split word on its own (normalization, pre-tokenization and the
model act within a word), so a text that fits one window is its words' tokens, in order,
between the special tokens of a one-sequence row. `cache` (a TokenCache the pipeline keeps:
each character's token ids) lets such texts skip the tokenizer: the characters a call has not
seen before are tokenized first, each distinct one once (about 2,500 for 2,000 People's Daily
sentences), and the rows are then built from the cache. Over those sentences the tokenizer took
0.11 s of the lexical pipeline's 1.6 s. Texts longer than a window go through the tokenizer (its
windowing), as do all texts once CACHE_LIMIT characters are cached and a text has another. Either
way the rows are the tokenizer's own: tests/tasks/test_char_windows.py compares them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nlp.tokenizer import Tokenizer

__all__ = ["CACHE_LIMIT", "CharacterRows", "TokenCache", "Window"]

CACHE_LIMIT = 65_536  # characters cached per pipeline (the CJK blocks in everyday text are far fewer)
_PROBE = "。"  # the probe of a row's special tokens: any character these vocabularies tokenize


class TokenCache:
    """What `CharacterRows.of` may build rows with, without the tokenizer: each character's token
    ids (up to CACHE_LIMIT characters), and the special tokens around a one-sequence row (None
    when the tokenizer's rows are not that shape: then every text goes through the tokenizer)."""

    def __init__(self, tokenizer: Tokenizer) -> None:
        self.tokenizer = tokenizer
        self.tokens: dict[str, list[int]] = {}
        self.template = _template(tokenizer)

    def add(self, texts: list[list[str]]) -> None:
        """Cache the characters of `texts` not cached yet, while there is room."""
        if self.template is None or len(self.tokens) >= CACHE_LIMIT:
            return
        new = list(dict.fromkeys(c for chars in texts for c in chars if c not in self.tokens))
        new = new[:CACHE_LIMIT - len(self.tokens)]
        if new:
            pieces = self.tokenizer([[c] for c in new], is_split_into_words=True, unspaced_words=True,
                                    add_special_tokens=False)
            self.tokens.update(zip(new, pieces["input_ids"]))


@dataclass
class CharacterRows:
    """The rows of a list of texts (each a list of characters), in no particular order."""

    features: list[dict[str, list[int]]]
    text: list[int]
    word_ids: list[np.ndarray]

    @classmethod
    def of(cls, tokenizer: Tokenizer, texts: list[list[str]], *, max_length: int, stride: int,
           cache: TokenCache | None = None) -> CharacterRows:
        rows = cls([], [], [])
        slow = list(range(len(texts)))
        template = None if cache is None else cache.template
        if template is not None:
            cache.add(texts)  # the characters not seen yet: one tokenizer call over the distinct ones
            slow = []
            for k, chars in enumerate(texts):
                ids = [cache.tokens.get(c) for c in chars]
                if any(i is None for i in ids) or sum(map(len, ids)) + template.specials > max_length:
                    slow.append(k)
                else:
                    rows._add_cached(k, ids, template, tokenizer.char_type_ids("".join(chars)))
        if slow:
            rows._add_tokenized(tokenizer, [texts[k] for k in slow], slow, max_length, stride)
        return rows

    def windows(self) -> list[Window]:
        """Each row's Window: what the pipeline reads off the row's logits."""
        return [Window.of(word_ids) for word_ids in self.word_ids]

    def _add_cached(self, k: int, ids: list[list[int]], template: _Template, char_types: list[int] | None) -> None:
        tokens = [t for piece in ids for t in piece]
        words = np.repeat(np.arange(len(ids), dtype=np.int64), [len(piece) for piece in ids])
        n = template.specials + len(tokens)
        if char_types is None:
            types = [template.type_id] * n
        else:  # as the tokenizer gives them: each token its character's id, special tokens 0
            types = [0] * len(template.prefix) + [char_types[w] for w in words.tolist()] + [0] * len(template.suffix)
        self.features.append({"input_ids": template.prefix + tokens + template.suffix,
                              "token_type_ids": types, "attention_mask": [1] * n})
        self.text.append(k)
        self.word_ids.append(np.concatenate((np.full(len(template.prefix), -1, dtype=np.int64), words,
                                             np.full(len(template.suffix), -1, dtype=np.int64))))

    def _add_tokenized(self, tokenizer: Tokenizer, texts: list[list[str]], which: list[int], max_length: int,
                       stride: int) -> None:
        enc = tokenizer(texts, is_split_into_words=True, unspaced_words=True, truncation=True, max_length=max_length,
                        stride=stride, return_overflowing_tokens=True)
        keys = [k for k in ("input_ids", "token_type_ids", "attention_mask") if k in enc]
        for r, sample in enumerate(enc["overflow_to_sample_mapping"]):
            self.features.append({k: enc[k][r] for k in keys})
            self.text.append(which[sample])
            self.word_ids.append(np.array([-1 if w is None else w for w in enc.word_ids(r)], dtype=np.int64))


@dataclass(frozen=True)
class Window:
    """One row of a text: the token positions that start a character (its first sub-token), those
    characters (indices among the text's visible characters), and each one's centrality, its
    distance in tokens to the nearer end of the row's content. A character seen by several
    windows takes its tag from the one where it is most central."""

    positions: np.ndarray
    chars: np.ndarray
    centrality: np.ndarray

    @classmethod
    def of(cls, wid: np.ndarray) -> Window:
        """From a row's word ids (the character of each token, -1 for special tokens)."""
        first = (wid >= 0) & (wid != np.concatenate(([-2], wid[:-1])))
        positions = np.flatnonzero(first)
        content = np.flatnonzero(wid >= 0)  # the tokens of characters, special tokens aside
        lo, hi = (content[0], content[-1]) if len(content) else (0, 0)
        return cls(positions, wid[positions], np.minimum(positions - lo, hi - positions))


@dataclass(frozen=True)
class _Template:
    """The special tokens around a one-sequence row, and its token type id."""

    prefix: list[int]
    suffix: list[int]
    type_id: int

    @property
    def specials(self) -> int:
        return len(self.prefix) + len(self.suffix)


def _template(tokenizer: Tokenizer) -> _Template | None:
    """Read off the row of one probe character; None unless it is prefix + the character's
    tokens + suffix, all of one token type."""
    probe = tokenizer([[_PROBE]], is_split_into_words=True, unspaced_words=True,
                      add_special_tokens=False)["input_ids"][0]
    row = tokenizer([[_PROBE]], is_split_into_words=True, unspaced_words=True)
    ids, types = row["input_ids"][0], (row.get("token_type_ids") or [None])[0]
    at = next((i for i in range(len(ids) - len(probe) + 1) if ids[i:i + len(probe)] == probe), None)
    if not probe or at is None or types is None or len(set(types)) != 1 or \
            any(w is not None for i, w in enumerate(row.word_ids(0)) if not at <= i < at + len(probe)):
        return None
    return _Template(ids[:at], ids[at + len(probe):], types[0])
