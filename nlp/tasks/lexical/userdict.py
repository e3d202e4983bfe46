"""User dictionaries for the lexical pipelines: words kept whole, optionally with a forced POS.

    pipe = nlp.pipeline("lexical-analysis", user_dict=["飞桨", ("百度", "nt")])
    pipe = nlp.pipeline("word-segmentation", user_dict="my_words.txt")

A file holds one entry a line in jieba's user-dictionary format, ``word [frequency] [pos]``
(``飞桨``, ``飞桨 nz``, ``飞桨 10 nz``); blank lines and lines starting with ``#`` are skipped, and
anything else is a DataError naming the file and the line. The frequency is accepted for jieba
compatibility and not used. In code: a list of words and ``(word, pos)`` pairs, or a dict
``{word: pos or None}``.

Matching is forward maximum matching over the text as given: from left to right, at each
character the longest user word that starts there is taken, and matching resumes after it; so
matches never overlap. How the pipelines apply a match (nlp/tasks/lexical/pipeline.py): the
matched text becomes ONE word (never split), with the forced POS or else the POS the model scores
best over those characters; the model's words that lie outside every match are kept unchanged,
and a model word that straddles a match's edge keeps its characters outside the match.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Union

from nlp._common import ConfigError, DataError

__all__ = ["UserDictionary", "read_user_dictionary", "UserDictSource"]

UserDictSource = Union[str, os.PathLike, Iterable[Any], Mapping[str, Any], "UserDictionary", None]


def read_user_dictionary(path: str | os.PathLike, encoding: str = "utf-8") -> dict[str, str | None]:
    """{word: pos or None} from a ``word [frequency] [pos]`` file (see the module docstring)."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise ConfigError(f"user_dict {str(path)!r} is not a file; give a path to a user dictionary (one "
                          "'word [frequency] [pos]' a line), a list of words or (word, pos) pairs, or a dict")
    try:
        text = path.read_text(encoding="utf-8-sig" if encoding.lower().replace("_", "-") in ("utf-8", "utf8")
                              else encoding)
    except UnicodeDecodeError as err:
        line = path.read_bytes()[:err.start].count(b"\n") + 1
        raise DataError(f"{path}:{line}: not {encoding} text; save the dictionary as UTF-8") from None
    out: dict[str, str | None] = {}
    for lineno, line in enumerate(text.splitlines(), 1):
        parts = line.split()
        if not parts or parts[0].startswith("#"):
            continue
        where = f"{path}:{lineno}"
        if len(parts) > 3:
            raise DataError(f"{where}: expected 'word [frequency] [pos]', got {len(parts)} fields in {line!r} "
                            "(a user word has no spaces)")
        word, rest = parts[0], parts[1:]
        if len(rest) == 2 and not rest[0].isdigit():
            raise DataError(f"{where}: the frequency {rest[0]!r} is not a whole number; expected "
                            f"'word [frequency] [pos]', got {line!r}")
        pos = rest[-1] if rest and not rest[-1].isdigit() else None
        out[word] = pos
    return out


class UserDictionary:
    """User words (each with a forced POS or None) and their forward-maximum matches in a text."""

    def __init__(self, entries: Mapping[str, str | None] | None = None) -> None:
        self._words: dict[str, str | None] = {}
        self._longest: dict[str, int] = {}  # first character -> length of the longest word starting with it
        for word, pos in (entries or {}).items():
            self.add(word, pos)

    @classmethod
    def load(cls, source: UserDictSource) -> "UserDictionary":
        """A dictionary from a file path, a list of words / (word, pos) pairs, a dict, or None (empty)."""
        if source is None:
            return cls()
        if isinstance(source, UserDictionary):
            return source
        if isinstance(source, (str, os.PathLike)):
            return cls(read_user_dictionary(source))
        if isinstance(source, Mapping):
            return cls(dict(source))
        if not isinstance(source, Iterable):
            raise TypeError(f"user_dict must be a file path, a list of words or (word, pos) pairs, or a dict; "
                            f"got {type(source).__name__}")
        out = cls()
        for i, entry in enumerate(source):
            if isinstance(entry, str):
                out.add(entry)
            elif isinstance(entry, (tuple, list)) and len(entry) == 2:
                out.add(entry[0], entry[1])
            else:
                raise TypeError(f"user_dict entry {i} must be a word (str) or a (word, pos) pair, got "
                                f"{type(entry).__name__} {entry!r:.40}")
        return out

    def add(self, word: str, pos: str | None = None) -> None:
        """Add (or replace) one word; `pos` forces its part of speech."""
        if not isinstance(word, str):
            raise TypeError(f"user_dict words must be strings, got {word!r:.40} ({type(word).__name__})")
        if not word.strip() or word != word.strip():
            raise DataError(f"user word {word!r} is empty or begins or ends with white space")
        if pos is not None and (not isinstance(pos, str) or not pos or pos.split() != [pos]):
            raise DataError(f"the POS of user word {word!r} must be a tag without spaces (e.g. 'nz'), got {pos!r}")
        self._words[word] = pos
        self._longest[word[0]] = max(self._longest.get(word[0], 0), len(word))

    def __len__(self) -> int:
        return len(self._words)

    def __contains__(self, word: object) -> bool:
        return word in self._words

    def items(self) -> list[tuple[str, str | None]]:
        return list(self._words.items())

    def find(self, text: str) -> list[tuple[int, int, str | None]]:
        """Non-overlapping matches ``(start, end exclusive, pos or None)``, forward maximum matching."""
        out = []
        i, n = 0, len(text)
        while i < n:
            longest = self._longest.get(text[i], 0)
            for length in range(min(longest, n - i), 0, -1):
                pos = self._words.get(text[i:i + length], _MISSING)
                if pos is not _MISSING:
                    out.append((i, i + length, pos))
                    i += length
                    break
            else:
                i += 1
        return out

    def __repr__(self) -> str:
        return f"UserDictionary({len(self)} words)"


_MISSING: Any = object()
