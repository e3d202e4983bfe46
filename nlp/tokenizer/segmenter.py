"""jieba word segmentation for the hybrid tokenizer, with rjieba (Rust) as the fast path.

Both backends use jieba's dictionary: rjieba embeds the same `dict.txt` that jieba ships, and
tests/tokenizer/test_hybrid_segmenter.py checks that both cut the review and People's Daily
corpora identically with HMM off. HMM is off by default so that segmentation depends only on
the dictionary (deterministic, and identical across backends).

User words (`add_word`) go to both backends, so "飞桨" stays one word either way. With
`hmm=True` the backends' HMM paths for unknown words are not verified to agree, so the pure
Python jieba is used then (documented, not guessed).

Every character of the input comes back in exactly one word, in order: joined, the words are
the input. The hybrid tokenizer relies on that to compute offsets.
"""

from __future__ import annotations

import functools
import logging
import threading
from typing import Callable, Iterable

from nlp._common import ConfigError

__all__ = ["JiebaSegmenter", "has_rjieba"]

logger = logging.getLogger(__name__)
_LOCK = threading.Lock()


def has_rjieba() -> bool:
    try:
        import rjieba  # noqa: F401
    except ImportError:
        return False
    return True


class JiebaSegmenter:
    """Cut text into jieba words. `backend`: "auto" (rjieba if installed), "rjieba", "jieba"."""

    def __init__(
        self,
        user_words: Iterable[str] = (),
        *,
        hmm: bool = False,
        backend: str = "auto",
    ) -> None:
        if backend not in ("auto", "rjieba", "jieba"):
            raise ConfigError(f"segmenter backend {backend!r} is not valid; use 'auto', 'rjieba' or 'jieba'")
        if backend == "rjieba" and not has_rjieba():
            raise ImportError("the rjieba backend needs the `rjieba` package: pip install 'nlp-zh[fast]'")
        if backend == "rjieba" and hmm:
            raise ConfigError("backend='rjieba' is only verified with hmm=False; use backend='jieba' for HMM")
        if backend == "auto":
            backend = "rjieba" if has_rjieba() and not hmm else "jieba"
        self.backend = backend
        self.hmm = bool(hmm)
        self.user_words: list[str] = []
        self._impl = None
        for w in user_words:
            self.add_word(w)

    def _engine(self):
        if self._impl is None:
            with _LOCK:
                if self._impl is None:
                    if self.backend == "rjieba":
                        import rjieba

                        impl = rjieba.Jieba()
                        for w in self.user_words:
                            impl.add_word(w, None, None)
                    else:
                        import jieba

                        jieba.setLogLevel(logging.WARNING)
                        impl = jieba.Tokenizer()
                        for w in self.user_words:
                            impl.add_word(w)
                    self._impl = impl
        return self._impl

    def add_word(self, word: str) -> None:
        """Add a user word; it will come out as one word from then on."""
        if not isinstance(word, str) or not word or word != word.strip() or any(c.isspace() for c in word):
            raise ConfigError(f"user word {word!r} must be a non-empty string without whitespace")
        if word in self.user_words:
            return
        self.user_words.append(word)
        if self._impl is not None:
            if self.backend == "rjieba":
                self._impl.add_word(word, None, None)
            else:
                self._impl.add_word(word)

    def cut(self, text: str) -> list[str]:
        """Words of `text`, every character kept (spaces come back as their own words)."""
        engine = self._engine()
        if self.backend == "rjieba":
            return engine.cut(text, self.hmm)
        return engine.lcut(text, HMM=self.hmm)

    def cut_batch(self, texts: Iterable[str]) -> list[list[str]]:
        cut = self.cutter()
        return [cut(t) for t in texts]

    def cut_spaced(self, texts: Iterable[str], drop: str | None = None) -> list[str]:
        """`" ".join(cut(text))` for each text: one space between consecutive words.

        With `drop`, that character is then deleted (the hybrid tokenizer folds whitespace to
        NUL, which comes back as words of its own, and drops it here). One list comprehension
        of C calls per text: this is the hybrid tokenizer's hot loop.
        """
        cut = self.cutter()
        if drop is None:
            return [" ".join(cut(t)) for t in texts]
        return [" ".join(cut(t)).replace(drop, "") for t in texts]

    def cutter(self) -> Callable[[str], list[str]]:
        """The engine's cut as a one-argument function (user words added later still apply)."""
        engine, hmm = self._engine(), self.hmm
        if self.backend == "rjieba":
            return functools.partial(engine.cut, hmm=hmm)
        return functools.partial(engine.lcut, HMM=hmm)

    def __repr__(self) -> str:
        return f"JiebaSegmenter(backend={self.backend!r}, hmm={self.hmm}, user_words={len(self.user_words)})"
