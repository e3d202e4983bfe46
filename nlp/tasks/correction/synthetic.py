"""Synthetic spelling errors: clean sentences -> (wrong sentence, clean sentence) pairs.

A writer's misspelling in Chinese is a real character in the wrong place, mostly one that sounds
the same (typed by pinyin) and less often one that looks alike (handwriting, OCR): in SIGHAN's
learner essays about three quarters of the errors are phonological. The generator reproduces
that: per sentence, with probability `clean_rate` no error at all (a corrector must learn to
leave correct text alone), else 1 error (70%), 2 (22%) or 3 (8%), each at a distinct Chinese
character, replaced by a character drawn from

- pycorrector's same-pinyin set (50%), pypinyin's toneless homophones (20%), or
- pycorrector's similar-shape set (30%),

falling back to the other kinds when a character has no candidate of the drawn kind. Digits,
Latin letters, punctuation, white space and every other non-Chinese character are never changed
(`resources.is_chinese_char`). Each sentence's errors depend only on (seed, sentence), through
its own random generator, so a dataset is the same whatever order or subset it is built from.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterable
from dataclasses import dataclass

from nlp.tasks.correction.resources import Confusions, is_chinese_char

__all__ = ["ErrorModel", "corrupt", "corrupt_all"]


@dataclass(frozen=True)
class ErrorModel:
    clean_rate: float = 0.3  # sentences left without an error
    # how many errors a sentence with errors gets: 1, 2, 3 with these weights
    error_counts: tuple[float, float, float] = (0.70, 0.22, 0.08)
    # the kind of each error: same pinyin (pycorrector), toneless homophone (pypinyin), similar shape
    kinds: tuple[float, float, float] = (0.5, 0.2, 0.3)

    def __post_init__(self) -> None:
        if not 0.0 <= self.clean_rate <= 1.0:
            raise ValueError(f"clean_rate must be in [0, 1], got {self.clean_rate}")
        for name in ("error_counts", "kinds"):
            weights = getattr(self, name)
            if len(weights) != 3 or any(w < 0 for w in weights) or sum(weights) <= 0:
                raise ValueError(f"{name} must be three non-negative weights with a positive sum, got {weights}")


def _rng(seed: int, sentence: str) -> random.Random:
    digest = hashlib.sha256(f"{seed}\x00{sentence}".encode("utf-8")).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def corrupt(sentence: str, confusions: Confusions, *, seed: int = 0, model: ErrorModel = ErrorModel()) -> str:
    """`sentence` with synthetic spelling errors (same length; only Chinese characters that have
    confusion candidates are changed), or unchanged (a clean example)."""
    rng = _rng(seed, sentence)
    if rng.random() < model.clean_rate:
        return sentence
    tables = (confusions.sound, confusions.homophone, confusions.shape)
    where = [i for i, c in enumerate(sentence) if is_chinese_char(c) and any(c in t for t in tables)]
    if not where:
        return sentence
    n = min(len(where), rng.choices((1, 2, 3), weights=model.error_counts)[0])
    chars = list(sentence)
    for i in sorted(rng.sample(where, n)):
        first = rng.choices((0, 1, 2), weights=model.kinds)[0]
        for kind in (first, *(k for k in (0, 1, 2) if k != first)):
            cands = tables[kind].get(chars[i])
            if cands:
                chars[i] = rng.choice(cands)
                break
    return "".join(chars)


def corrupt_all(sentences: Iterable[str], confusions: Confusions, *, seed: int = 0,
                model: ErrorModel = ErrorModel()) -> list[tuple[str, str]]:
    """(wrong, clean) per sentence."""
    return [(corrupt(s, confusions, seed=seed, model=model), s) for s in sentences]
