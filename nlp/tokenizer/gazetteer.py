"""A gazetteer: typed words (person, place and organisation names, any word list) whose matches in
a text become each token's token type id, a feature character-level models (NER, lexical
analysis) learn from beside the characters themselves.

    gaz = Gazetteer.from_jieba()                     # jieba's dictionary: PER / LOC / ORG / WORD
    gaz = Gazetteer.read("names.tsv")                # your own: one `word<TAB>TYPE` per line
    gaz.type_ids("喀喇昆仑山口")                      # one id per character: 0 = no word covers it

Each character takes the longest word that covers it (of equal lengths, the one that starts
first) and is coded by that word's type and its position in the word: 0 when no word covers the
character, else 1 + 4 * type index + position (B, I, E of a longer word; S of a one-character
word), so a gazetteer of T types needs 1 + 4T token type ids. A tokenizer that carries one
(`tokenizer.gazetteer`, saved beside its files as gazetteer.tsv.gz and named in
tokenizer_config.json) gives every token of a single text the id of the character it starts at,
so training, evaluation, pipelines, export and serving all see the same feature.

Why the longest covering word: a character inside 喀喇昆仑山 is a place whether or not 昆仑 alone
is one, and one id per character keeps the feature a single embedding row, which the models'
token type embeddings already are (`nlp finetune ... task.gazetteer=jieba` grows them, the new
rows starting as the old row 0 so the model begins where it was).
"""

from __future__ import annotations

import gzip
import hashlib
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from nlp._common import ConfigError, DataError, atomic_write

__all__ = ["GAZETTEER_FILE", "Gazetteer", "JIEBA_TYPES", "gazetteer_name_problem"]

GAZETTEER_FILE = "gazetteer.tsv.gz"  # gzip: jieba's 337k words are 4.7 MB as text, 1.4 MB compressed
POSITIONS = ("B", "I", "E", "S")
MAX_WORD_LENGTH = 12  # longer entries are never matched: names past it are rare and costly to scan for
# jieba's part-of-speech tags of names; every other tagged word of two or more characters is a WORD
JIEBA_TYPES = {"nr": "PER", "nrt": "PER", "nrfg": "PER", "ns": "LOC", "nt": "ORG"}
_JIEBA_ORDER = ("WORD", "PER", "LOC", "ORG")


def gazetteer_name_problem(name: Any) -> str | None:
    """What is wrong with a recipe's `task.gazetteer` value (None: `jieba` or an existing file)."""
    if name is None or name == "jieba":
        return None
    if not isinstance(name, str) or not name.strip():
        return f"gazetteer must be `jieba` or the path of a word<TAB>TYPE file, got {name!r}"
    if not Path(name).expanduser().is_file():
        return f"gazetteer file {name} does not exist; give a word<TAB>TYPE file or `jieba`"
    return None


class Gazetteer:
    """Words with a type each; `type_ids(text)` codes every character by the longest word over it."""

    def __init__(self, words: Mapping[str, str], types: Sequence[str] | None = None, *,
                 max_word_length: int = MAX_WORD_LENGTH) -> None:
        if not isinstance(max_word_length, int) or isinstance(max_word_length, bool) or max_word_length < 1:
            raise ConfigError(f"max_word_length must be a positive integer, got {max_word_length!r}")
        types = tuple(sorted(set(words.values()))) if types is None else tuple(types)
        if len(set(types)) != len(types) or not all(isinstance(t, str) and t for t in types):
            raise ConfigError(f"gazetteer types must be distinct non-empty names, got {list(types)}")
        index = {t: i for i, t in enumerate(types)}
        unknown = sorted({t for t in words.values() if t not in index})
        if unknown:
            raise ConfigError(f"gazetteer words have types {unknown} not among its types {list(types)}")
        self.types = types
        self.max_word_length = max_word_length
        self.words = {w: t for w, t in words.items() if len(w) <= max_word_length}
        self._index = {w: index[t] for w, t in self.words.items()}
        # every prefix of a word: the scan from a character stops at the first piece none starts with
        self._prefixes = {w[:k] for w in self._index for k in range(1, len(w) + 1)}

    @property
    def num_type_ids(self) -> int:
        """Token type ids a model needs for this gazetteer: 0 plus B/I/E/S of each type."""
        return 1 + len(POSITIONS) * len(self.types)

    def __len__(self) -> int:
        return len(self.words)

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, Gazetteer) and self.types == other.types
                and self.max_word_length == other.max_word_length and self.words == other.words)

    def __repr__(self) -> str:
        return f"Gazetteer({len(self.words)} words, types={list(self.types)})"

    def type_ids(self, text: str) -> list[int]:
        """One id per character of `text` (see the module docstring)."""
        n = len(text)
        longest, ids = [0] * n, [0] * n
        index, prefixes, cap = self._index, self._prefixes, self.max_word_length
        for i in range(n):
            for j in range(i + 1, min(n, i + cap) + 1):
                piece = text[i:j]
                if piece not in prefixes:
                    break
                t = index.get(piece)
                if t is None:
                    continue
                size, base = j - i, 1 + len(POSITIONS) * t
                for k in range(i, j):
                    if size > longest[k]:
                        longest[k] = size
                        ids[k] = base + (3 if size == 1 else 0 if k == i else 2 if k == j - 1 else 1)
        return ids

    # ---- sources -------------------------------------------------------------------------
    @classmethod
    def from_jieba(cls, *, max_word_length: int = MAX_WORD_LENGTH) -> Gazetteer:
        """jieba's dictionary: words of two or more characters, typed PER / LOC / ORG by their
        part-of-speech tag (JIEBA_TYPES), WORD otherwise."""
        import jieba

        with jieba.Tokenizer().get_dict_file() as f:  # jieba's own way to its dictionary, as augment.py
            lines = f.read().decode("utf-8").splitlines()
        words: dict[str, str] = {}
        for line in lines:
            parts = line.split()
            if len(parts) >= 2 and len(parts[0]) >= 2:
                words[parts[0]] = JIEBA_TYPES.get(parts[2] if len(parts) > 2 else "", "WORD")
        return cls(words, _JIEBA_ORDER, max_word_length=max_word_length)

    @classmethod
    def read(cls, path: str | os.PathLike, types: Sequence[str] | None = None, *,
             max_word_length: int = MAX_WORD_LENGTH) -> Gazetteer:
        """A UTF-8 file of `word<TAB>TYPE` lines (blank lines skipped), gzip-compressed when its
        name ends in .gz. A word listed twice with two types, or a line that is not a word and a
        type, is refused with its line number."""
        path = Path(path)
        if not path.is_file():
            raise ConfigError(f"gazetteer file {path} does not exist; give a file of word<TAB>TYPE lines "
                              "or `jieba` for jieba's dictionary")
        return cls._parse(path, path.read_bytes(), types, max_word_length)

    @classmethod
    def _parse(cls, path: Path, data: bytes, types: Sequence[str] | None, max_word_length: int) -> Gazetteer:
        """The gazetteer in `data`, the bytes of the file `path` (named in errors)."""
        words: dict[str, str] = {}
        first_line: dict[str, int] = {}
        if path.suffix == ".gz":
            try:
                data = gzip.decompress(data)
            except (OSError, EOFError) as err:
                raise DataError(f"{path}: not a gzip file ({err}); give the gazetteer as text or gzip") from None
        try:
            lines = data.decode("utf-8").splitlines()
        except UnicodeDecodeError as err:
            raise DataError(f"{path}: not UTF-8 text ({err}); save the gazetteer as UTF-8") from None
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            parts = line.split("\t")
            if len(parts) != 2 or not parts[0] or not parts[1].strip() or any(c.isspace() for c in parts[0]):
                raise DataError(f"{path}:{number}: {line[:60]!r} is not `word<TAB>TYPE` (a word without "
                                "spaces, one tab, a type name)")
            word, type_ = parts[0], parts[1].strip()
            if words.get(word, type_) != type_:
                raise DataError(f"{path}:{number}: {word!r} is {type_} here but {words[word]} on line "
                                f"{first_line[word]}; give each word one type")
            words[word] = type_
            first_line.setdefault(word, number)
        if not words:
            raise DataError(f"{path} lists no words; give one `word<TAB>TYPE` per line")
        return cls(words, types, max_word_length=max_word_length)

    @classmethod
    def named(cls, name: str) -> Gazetteer:
        """`jieba` or a file path (what a recipe's `task.gazetteer` holds)."""
        return cls.from_jieba() if name == "jieba" else cls.read(Path(name).expanduser())

    # ---- files beside a tokenizer --------------------------------------------------------
    def save(self, directory: str | os.PathLike) -> dict[str, Any]:
        """Write gazetteer.tsv.gz into `directory`; returns its tokenizer_config.json entry."""
        text = "".join(f"{w}\t{t}\n" for w, t in sorted(self.words.items()))
        # no time stamp: the same words, the same bytes. Level 6, not gzip's 9: the same size here
        # at a seventh of the time, and a run saves its tokenizer with every checkpoint
        data = gzip.compress(text.encode("utf-8"), compresslevel=6, mtime=0)
        with atomic_write(Path(directory) / GAZETTEER_FILE, "wb") as f:
            f.write(data)
        return {"file": GAZETTEER_FILE, "types": list(self.types), "max_word_length": self.max_word_length,
                "sha256": hashlib.sha256(data).hexdigest()}

    @classmethod
    def load(cls, directory: str | os.PathLike, entry: Any) -> Gazetteer:
        """The gazetteer a tokenizer_config.json `gazetteer` entry names, checked against its digest."""
        where = Path(directory) / "tokenizer_config.json"
        if not isinstance(entry, dict) or entry.get("file") != GAZETTEER_FILE or \
                not isinstance(entry.get("types"), list) or not isinstance(entry.get("sha256"), str):
            raise ConfigError(f"{where}: gazetteer must be {{file: {GAZETTEER_FILE}, types: [...], "
                              f"max_word_length: N, sha256: ...}}, got {entry!r}")
        path = Path(directory) / GAZETTEER_FILE
        if not path.is_file():
            raise ConfigError(f"{where} names a gazetteer but {path} is missing; copy the tokenizer's "
                              "directory whole")
        data = path.read_bytes()  # read once: checked, then parsed
        digest = hashlib.sha256(data).hexdigest()
        if digest != entry["sha256"]:
            raise DataError(f"{path} has sha256 {digest[:12]}..., not the {entry['sha256'][:12]}... "
                            "tokenizer_config.json records: the file changed since the model was "
                            "trained; restore it or fine-tune again with the new one")
        return cls._parse(path, data, entry["types"], entry.get("max_word_length", MAX_WORD_LENGTH))
