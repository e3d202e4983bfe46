"""Symbols a character-level model cannot read: the characters whose tokens are only the
tokenizer's unknown token and whose Unicode category is not a letter, a number or a mark (emoji,
flags, pictographs and dingbats outside the vocabulary, unassigned code points).

Why the pipelines look at them: to the model such a character is [UNK], and in the text it was
trained on [UNK] stood for rare characters, most of them in names (生僻字). So the shipped NER
model tagged 😀 as a person and glued 👍 onto 李鹏, and the lexical model made 鹏👍 one word. The
model cannot tell an unknown emoji from an unknown name character; Unicode can. A symbol is a word
of its own and in no entity, so the NER pipeline decodes such a character as O and the lexical
pipelines as a one-character word of POS w (symbols and punctuation), each by pinning that
character's scores before the Viterbi pass (`pin_rows`), which then keeps every tag path well
formed around it. An unknown letter (𠀀, an unlisted CJK character) is left to the model: it can be
part of a name. Labelled corpora rarely hold such symbols: the test splits of the built-in NER and
lexical datasets have none, their dev splits one arrow (→, outside every entity), so their scores
are unchanged; tests/tasks/test_unreadable_symbols.py.

    symbols = UnreadableSymbols(tokenizer)   # kept by the pipeline
    symbols.mask(list("😀李鹏"))             # array([ True, False, False])

A whole text can be unreadable too: "😡" is `<unk>` to the shipped sentiment model's vocabulary,
as "💩" and "👍" are, so each got the label the model gives a lone `<unk>` (positive, 0.85). The
pipelines that refuse a text with no tokens (classification, embeddings, ranking: their answer
would be the same for every such text) refuse one with no token they know for the same reason
(`KnownCharacters`, `Pipeline.unknown_only`).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence

import numpy as np

__all__ = ["PINNED_LOGIT", "KnownCharacters", "UnreadableSymbols", "pin_rows"]

PINNED_LOGIT = -1e4  # every other label's score on a pinned character: far below any real logit
_READABLE_CATEGORIES = ("L", "N", "M")  # letters, numbers, marks: never taken from the model
_VERDICT_LIMIT = 65_536  # characters remembered per pipeline (a text of every code point is not a leak)


class UnreadableSymbols:
    """Which characters of a text are unreadable symbols to `tokenizer`, remembered per character."""

    def __init__(self, tokenizer) -> None:
        self.tokenizer = tokenizer
        self.unk_id = getattr(tokenizer, "unk_token_id", None)
        self._verdict: dict[str, bool] = {}

    def mask(self, characters: Sequence[str]) -> np.ndarray | None:
        """One bool per character (True: an unreadable symbol), or None when there is none."""
        if self.unk_id is None:
            return None
        verdict, distinct = self._verdict, set(characters)
        new = [c for c in distinct if c not in verdict]
        if new:
            if len(verdict) + len(new) > _VERDICT_LIMIT:
                verdict.clear()
                new = list(distinct)
            self._learn(new)
        if not any(verdict[c] for c in distinct):
            return None
        return np.fromiter((verdict[c] for c in characters), dtype=bool, count=len(characters))

    def _learn(self, characters: list[str]) -> None:
        candidates = []
        for c in characters:
            readable = unicodedata.category(c)[0] in _READABLE_CATEGORIES
            self._verdict[c] = False
            if not readable:
                candidates.append(c)
        if candidates:  # one tokenizer call for the symbols of the batch, each one alone
            ids = self.tokenizer([[c] for c in candidates], is_split_into_words=True, unspaced_words=True,
                                 add_special_tokens=False)["input_ids"]
            for c, piece in zip(candidates, ids):
                self._verdict[c] = bool(piece) and all(t == self.unk_id for t in piece)


def pin_rows(scores: np.ndarray, where: np.ndarray, label: int) -> None:
    """Make `label` the only choice at the rows `where` (bool) of `scores` (n, labels), in place."""
    scores[where] = PINNED_LOGIT
    scores[where, label] = 0.0


class KnownCharacters:
    """Whether a text holds a character the tokenizer knows (one that alone is a token other than
    the unknown one and a bare word-start mark), remembered per character: for a text of ordinary
    characters the first one answers."""

    def __init__(self, tokenizer) -> None:
        self.tokenizer = tokenizer
        self.unknown = set(tokenizer.contentless_ids) | {getattr(tokenizer, "unk_token_id", None)}
        self._known: dict[str, bool] = {}

    def any_in(self, text: str) -> bool:
        known = self._known
        for c in text:
            verdict = known.get(c)
            if verdict is None:
                self._learn(text)
                return any(known[c] for c in text)
            if verdict:
                return True
        return False

    def _learn(self, text: str) -> None:
        new = [c for c in dict.fromkeys(text) if c not in self._known]
        if len(self._known) + len(new) > _VERDICT_LIMIT:
            self._known.clear()
            new = list(dict.fromkeys(text))
        ids = self.tokenizer([[c] for c in new], is_split_into_words=True, unspaced_words=True,
                             add_special_tokens=False)["input_ids"]
        for c, piece in zip(new, ids):
            self._known[c] = any(t not in self.unknown for t in piece)
