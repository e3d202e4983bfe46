"""`WordSegmentationPipeline`: Chinese word segmentation with jieba, with character offsets
(`nlp.pipeline("word-segmentation", model="jieba")`; the task's default is the neural model).

The segmenter is the toolkit's jieba wrapper (`nlp.tokenizer.segmenter.JiebaSegmenter`): rjieba
(Rust) when installed, else jieba, both on jieba's dictionary. HMM discovery of unknown words is
off by default, so that the result depends only on the dictionary and is the same with either
backend; ``hmm=True`` turns it on (pure-Python jieba, as `jieba.lcut` does by default: better on
names and new words, not verified identical across backends).

User dictionaries: ``user_dict=`` takes a list of words or the path of a jieba user dictionary
(one entry a line, ``word [frequency] [tag]``; the word is what is used; blank lines and lines
starting with ``#`` are skipped). A user word always comes out as one word.

Output, per text, the words in order: ``{"word", "start", "end"}`` with ``text[start:end] ==
word`` (offsets in characters, end exclusive, as the other pipelines). Whitespace is not a word
and is left out; every other character is in exactly one word.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from typing import Any

from nlp.tasks.lexical.userdict import UserDictionary, read_user_dictionary
from nlp.tokenizer.segmenter import JiebaSegmenter

__all__ = ["WordSegmentationPipeline", "read_user_dict"]


def read_user_dict(path: str | os.PathLike) -> list[str]:
    """The words of a jieba-format user dictionary file (``word [frequency] [tag]`` a line; the
    one reader of that format, shared with the lexical pipelines: DataError names a bad line)."""
    return list(read_user_dictionary(path))


class WordSegmentationPipeline:
    """Call with a string (-> list of words) or a list of strings (-> a list per text)."""

    task = "word-segmentation"

    def __init__(self, user_dict: str | os.PathLike | Iterable[str] | None = None, *,
                 hmm: bool = False, backend: str = "auto") -> None:
        if isinstance(user_dict, (bytes, bytearray)):  # a path in bytes, as open() takes one
            user_dict = os.fsdecode(bytes(user_dict))
        if user_dict is None:
            words: list[str] = []
        elif isinstance(user_dict, (str, os.PathLike)):
            words = read_user_dict(user_dict)
        else:
            words = list(user_dict)
            bad = [w for w in words if not isinstance(w, str)]
            if bad:
                raise TypeError(f"user_dict words must be strings, got {bad[0]!r} "
                                f"({type(bad[0]).__name__})")
        UserDictionary.load(words)  # the lexical pipelines' checks: no white space inside a word, no lone surrogate
        self.segmenter = JiebaSegmenter(words, hmm=hmm, backend=backend)

    @property
    def backend(self) -> str:
        return self.segmenter.backend

    def add_word(self, word: str) -> None:
        """Add a user word after construction."""
        UserDictionary().add(word)  # checked as a user word of the lexical pipelines
        self.segmenter.add_word(word)

    def _one(self, text: str) -> list[dict[str, Any]]:
        out, pos = [], 0
        for word in self.segmenter.cut(text):
            start, pos = pos, pos + len(word)
            if word.strip():
                out.append({"word": word, "start": start, "end": pos})
        return out

    def __call__(self, inputs: str | Sequence[str]) -> list[dict[str, Any]] | list[list[dict[str, Any]]]:
        if isinstance(inputs, str):
            return self._one(inputs)
        if not isinstance(inputs, (list, tuple)):
            raise TypeError(f"word-segmentation takes a string or a list of strings, got "
                            f"{type(inputs).__name__}")
        bad = [(i, x) for i, x in enumerate(inputs) if not isinstance(x, str)]
        if bad:
            i, x = bad[0]
            raise TypeError(f"word-segmentation: input {i} is a {type(x).__name__} ({x!r}), not a string")
        return [self._one(t) for t in inputs]

    def __repr__(self) -> str:
        return f"WordSegmentationPipeline({self.segmenter!r})"
