"""User dictionaries for the lexical pipelines: words kept whole, optionally with a forced POS.

    pipe = nlp.pipeline("lexical-analysis", user_dict=["飞桨", ("百度", "nt")])
    pipe = nlp.pipeline("word-segmentation", user_dict="my_words.txt")

A file holds one entry a line in jieba's user-dictionary format, ``word [frequency] [pos]``
(``飞桨``, ``飞桨 nz``, ``飞桨 10 nz``); blank lines and lines starting with ``#`` are skipped, and
anything else is a DataError naming the file and the line. The frequency is accepted for jieba
compatibility and not used. In code: a list of words and ``(word, pos)`` pairs, or a dict
``{word: pos or None}``.

A user word is refused (DataError naming it) when it is empty, holds white space of any kind
(space, tab, newline, NBSP, U+3000: a word never spans white space, so it could never match as
one word, and its training line would not read back) or a lone surrogate (not text); a forced
POS must be one of the model's tags (the pipelines pass theirs: `require_tags`).

Matching is forward maximum matching over the text as given: from left to right, at each
character the longest user word that starts there is taken, and matching resumes after it; so
matches never overlap. The longest word starting at each character comes from one pass of an
Aho-Corasick automaton over the reversed words and the reversed text, so matching costs a few
steps per character however long the entries are (trying every length at each character cost
the square of a long entry's length per character). How the pipelines apply a match (nlp/tasks/lexical/pipeline.py): the
matched text becomes ONE word (never split), with the forced POS or else the POS the model scores
best over those characters; the model's words that lie outside every match are kept unchanged,
and a model word that straddles a match's edge keeps its characters outside the match.
"""

from __future__ import annotations

import difflib
import os
from collections import deque
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
        self._tags: tuple[str, ...] | None = None  # the POS a word may force (None: not checked yet)
        self._automaton: _ReversedAutomaton | None = None  # built on the first find after a change
        self.steps = 0  # automaton transitions of the last find: its work, a few per character
        for word, pos in (entries or {}).items():
            self.add(word, pos)

    @classmethod
    def load(cls, source: UserDictSource) -> "UserDictionary":
        """A dictionary from a file path, a list of words / (word, pos) pairs, a dict, or None (empty)."""
        if source is None:
            return cls()
        if isinstance(source, UserDictionary):
            return source
        if isinstance(source, (bytes, bytearray)):  # a path in bytes, as open() takes one
            source = os.fsdecode(bytes(source))
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
            raise DataError(f"user word {_show(word)} is empty or begins or ends with white space")
        space = next((c for c in word if c.isspace()), None)
        if space is not None:
            raise DataError(f"user word {_show(word)} holds white space ({space!r} at character {word.index(space)}); "
                            "a word never spans white space, so it would never match as one word. Remove the "
                            "white space, or add the parts as words of their own")
        try:
            word.encode("utf-8")
        except UnicodeEncodeError as err:
            raise DataError(f"user word {_show(word)} holds a lone surrogate {word[err.start]!r} at character "
                            f"{err.start}, which is not text; decode the source with errors='replace'") from None
        if pos is not None and (not isinstance(pos, str) or not pos or pos.split() != [pos]):
            raise DataError(f"the POS of user word {_show(word)} must be a tag without spaces (e.g. 'nz'), "
                            f"got {pos!r}")
        self._check_tag(word, pos)
        self._words[word] = pos
        self._automaton = None

    def require_tags(self, tags: Iterable[str]) -> None:
        """Refuse a forced POS outside `tags` (the model's), now and for words added later."""
        self._tags = tuple(dict.fromkeys(tags))
        for word, pos in self._words.items():
            self._check_tag(word, pos)

    def _check_tag(self, word: str, pos: str | None) -> None:
        if pos is None or self._tags is None or pos in self._tags:
            return
        close = difflib.get_close_matches(pos, self._tags, n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise DataError(f"user word {_show(word)} forces the POS {pos!r}, which is not one of the model's tags: "
                        f"{', '.join(self._tags)}.{hint} Give one of them, or no POS (the model then picks it)")

    def __len__(self) -> int:
        return len(self._words)

    def __contains__(self, word: object) -> bool:
        return word in self._words

    def items(self) -> list[tuple[str, str | None]]:
        return list(self._words.items())

    def find(self, text: str) -> list[tuple[int, int, str | None]]:
        """Non-overlapping matches ``(start, end exclusive, pos or None)``, forward maximum matching."""
        if not self._words:
            self.steps = 0
            return []
        if self._automaton is None:
            self._automaton = _ReversedAutomaton(self._words)
        longest, self.steps = self._automaton.longest_starts(text)
        out = []
        i, n = 0, len(text)
        while i < n:
            length = longest[i]
            if length:
                out.append((i, i + length, self._words[text[i:i + length]]))
                i += length
            else:
                i += 1
        return out

    def __repr__(self) -> str:
        return f"UserDictionary({len(self)} words)"


def _show(word: str) -> str:
    return repr(word) if len(word) <= 40 else f"{word[:37]!r}... ({len(word)} characters)"


class _ReversedAutomaton:
    """Aho-Corasick over the reversed words: run over the reversed text, the state after the
    character at i knows the longest word that starts at i (a suffix of the reversed text read
    so far). Each character costs one transition plus failure links, amortised O(1)."""

    def __init__(self, words: Iterable[str]) -> None:
        self.goto: list[dict[str, int]] = [{}]
        depth = [0]
        terminal = [False]
        for word in words:
            node = 0
            for c in reversed(word):
                nxt = self.goto[node].get(c)
                if nxt is None:
                    nxt = len(self.goto)
                    self.goto[node][c] = nxt
                    self.goto.append({})
                    depth.append(depth[node] + 1)
                    terminal.append(False)
                node = nxt
            terminal[node] = True
        self.fail = [0] * len(self.goto)
        # the length of the longest word that is a suffix of the node's string (0: none)
        self.best = [depth[i] if terminal[i] else 0 for i in range(len(self.goto))]
        queue = deque(self.goto[0].values())
        while queue:  # breadth first: a node's failure link is set before its children's
            node = queue.popleft()
            if not self.best[node]:
                self.best[node] = self.best[self.fail[node]]
            for c, child in self.goto[node].items():
                f = self.fail[node]
                while f and c not in self.goto[f]:
                    f = self.fail[f]
                self.fail[child] = self.goto[f].get(c, 0) if self.goto[f].get(c, 0) != child else 0
                queue.append(child)

    def longest_starts(self, text: str) -> tuple[list[int], int]:
        """(the length of the longest word starting at each character (0: none), transitions made)."""
        goto, fail, best = self.goto, self.fail, self.best
        out = [0] * len(text)
        state, steps = 0, 0
        for i in range(len(text) - 1, -1, -1):
            c = text[i]
            while state and c not in goto[state]:
                state = fail[state]
                steps += 1
            state = goto[state].get(c, 0)
            steps += 1
            out[i] = best[state]
        return out, steps
