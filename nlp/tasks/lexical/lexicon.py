"""A model's word lexicon: the words of its training data, each with its wordhood, as a decoding prior.

    lexicon = WordLexicon.from_sentences(train["words"])        # [["江", "泽民", ...], ...]
    lexicon.save(model_dir)                                     # model_dir/lexicon.tsv
    nlp.pipeline("word-segmentation", model=model_dir)          # decodes with it (lexicon=False: without)

A small tagger underfits the vocabulary of its own training data: on the held-out People's Daily
test it misses 3% of the words it was trained on. The lexicon gives them back at decoding time.
Each word of two or more characters seen in the training sentences keeps its *wordhood*: of the
times its characters occur in the training text, the share where they are that word (中非 as a
word, not 中 + 非). Decoding (nlp/tasks/lexical/lexicon_decode.py) adds ``weight x wordhood`` to
the log-probability of any path that reads such a span as one word, so a word the model half
believes is kept whole, and a string that is usually not a word gets little help. The weight is
chosen on the dev split (docs/lexical.md, "The word lexicon").

The file, ``lexicon.tsv`` beside the model's weights (UTF-8)::

    # nlp word lexicon 1
    # weight<TAB>12
    长江<TAB>0.9667
    ...

Comment lines start with ``#``; a ``# weight`` line is required; every other line is a word (two or
more characters, no white space) and its wordhood in (0, 1].
"""

from __future__ import annotations

import math
import os
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import numpy as np

from nlp._common import ConfigError, DataError, atomic_write

__all__ = ["LEXICON_FILE", "WordLexicon"]

LEXICON_FILE = "lexicon.tsv"
_HEADER = "# nlp word lexicon 1"
# the longest word kept: longer training words (long numbers, names with titles) are rare, and
# every extra character is one more lookup per character of every text decoded
MAX_WORD_LENGTH = 12


class WordLexicon:
    """Words (two or more characters) with their wordhood in (0, 1], and the decoding weight."""

    def __init__(self, wordhood: Mapping[str, float], weight: float) -> None:
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not math.isfinite(weight) or weight < 0:
            raise ConfigError(f"a lexicon's weight must be a finite number >= 0; got {weight!r}")
        for word, value in wordhood.items():
            _check_entry(word, value, where="")
        self.weight = float(weight)
        self.wordhood = dict(wordhood)
        self.max_length = max((len(w) for w in self.wordhood), default=0)
        self._prefixes = {w[:k] for w in self.wordhood for k in range(1, len(w))}

    @classmethod
    def from_sentences(cls, sentences: Iterable[Sequence[str]], *, weight: float,
                       min_count: int = 1, max_length: int = MAX_WORD_LENGTH) -> WordLexicon:
        """From segmented sentences (each a list of words): every word of 2..`max_length`
        characters seen at least `min_count` times, with the share of its string's occurrences in
        the joined sentences where it is that word."""
        sentences = [list(s) for s in sentences]
        as_word = Counter(w for s in sentences for w in s if 2 <= len(w) <= max_length)
        words = {w for w, n in as_word.items() if n >= min_count}
        probe = cls(dict.fromkeys(words, 1.0), weight=1.0)  # finds the words' strings wherever they stand
        as_string: Counter[str] = Counter()
        for s in sentences:
            text = "".join(s)
            starts, ends, _ = probe.find(text)
            as_string.update(text[i:j] for i, j in zip(starts.tolist(), ends.tolist()))
        return cls({w: round(as_word[w] / max(as_string[w], as_word[w]), 4) for w in sorted(words)}, weight)

    def __len__(self) -> int:
        return len(self.wordhood)

    def __contains__(self, word: object) -> bool:
        return word in self.wordhood

    def __repr__(self) -> str:
        return f"WordLexicon({len(self)} words, weight={self.weight:g})"

    def find(self, chars: Sequence[str] | str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every lexicon word in `chars` (a string, or one character per item): (starts, ends,
        bonuses) as arrays, ``weight x wordhood`` each, in order of start then end."""
        text = chars if isinstance(chars, str) else "".join(chars)
        if len(text) != len(chars):
            raise ValueError("find() takes one character per item")
        starts, ends, bonus = [], [], []
        words, prefixes, longest, n = self.wordhood, self._prefixes, self.max_length, len(text)
        for i in range(n - 1):
            if text[i] not in prefixes:
                continue
            for j in range(i + 2, (i + longest if i + longest < n else n) + 1):
                piece = text[i:j]
                value = words.get(piece)
                if value is not None:
                    starts.append(i)
                    ends.append(j)
                    bonus.append(value)
                if piece not in prefixes:
                    break
        return (np.array(starts, dtype=np.int64), np.array(ends, dtype=np.int64),
                np.array(bonus, dtype=np.float32) * np.float32(self.weight))

    # ------------------------------------------------------------------ files

    def save(self, directory: str | os.PathLike) -> Path:
        """Write `directory`/lexicon.tsv atomically; returns its path."""
        path = Path(directory) / LEXICON_FILE
        lines = [_HEADER, f"# weight\t{self.weight:g}"] + [f"{w}\t{v:.4f}" for w, v in sorted(self.wordhood.items())]
        with atomic_write(path, "w", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
        return path

    save_pretrained = save  # what `nlp finetune` calls on what it saves with a model (TaskSpec.saved_with_model)

    @classmethod
    def load(cls, path: str | os.PathLike) -> WordLexicon:
        """From a lexicon.tsv file (or a directory holding one). DataError naming the line of a
        malformed entry."""
        path = Path(path)
        if path.is_dir():
            path = path / LEXICON_FILE
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise ConfigError(f"no lexicon file at {path}") from None
        except UnicodeDecodeError as err:
            raise DataError(f"{path} is not UTF-8 text ({err.reason} at byte {err.start}); a lexicon is "
                            f"UTF-8 lines of `word<TAB>wordhood`") from None
        weight, wordhood = None, {}
        for number, line in enumerate(text.splitlines(), 1):
            where = f"{path}:{number}"
            if line.startswith("#"):
                fields = line[1:].strip().split("\t")
                if fields[0] == "weight":
                    weight = _number(fields[1] if len(fields) == 2 else "", where, "weight")
                continue
            if not line.strip():
                continue
            fields = line.split("\t")
            if len(fields) != 2:
                raise DataError(f"{where}: expected `word<TAB>wordhood`, got {line[:60]!r}")
            word, value = fields[0], _number(fields[1], where, "wordhood")
            _check_entry(word, value, where=f"{where}: ")
            if word in wordhood:
                raise DataError(f"{where}: {word!r} is listed twice")
            wordhood[word] = value
        if weight is None:
            raise DataError(f"{path} has no `# weight<TAB>NUMBER` line: the decoding weight of its words")
        try:
            return cls(wordhood, weight)
        except ConfigError as err:
            raise DataError(f"{path}: {err}") from None


def _number(text: str, where: str, what: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise DataError(f"{where}: the {what} {text!r} is not a number") from None
    return value


def _check_entry(word: object, value: object, *, where: str) -> None:
    if not isinstance(word, str) or len(word) < 2 or any(c.isspace() for c in word):
        raise DataError(f"{where}lexicon words have two or more characters and no white space; got {word!r}")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
        raise DataError(f"{where}the wordhood of {word!r} must be in (0, 1]; got {value!r}")
