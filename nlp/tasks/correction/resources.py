"""The confusion sets and the benchmark file, read from the installed `pycorrector` wheel.

Nothing here is copied into this repository: each file is located inside the installed package
(`pip install 'nlp-zh[correction]'` installs pycorrector 1.1.4) and read when needed.

- `pycorrector/data/same_pinyin.txt`: per character, characters of the same sound and tone, and
  of the same sound with another tone (pycorrector, Apache-2.0; from the SIGHAN 2013 bake-off's
  confusion set of Wu et al.).
- `pycorrector/data/same_stroke.txt`: groups of characters of similar shape (same source).
- `pycorrector/data/common_char_set.txt`: the common characters; synthetic errors only ever
  write one of them, as a writer who picks the wrong character picks a real, common one.
- `pycorrector/data/sighan2015_test.tsv`: the SIGHAN-15 CSC test set in simplified characters
  (source TAB target per line: 707 sentences, 373 of them with errors; see `data.read_sighan_tsv`).

Homophones from `pypinyin` (common characters sharing a toneless syllable, heteronyms included)
are a third, broader set: sounds alike to a writer typing pinyin, whatever the tone.
"""

from __future__ import annotations

import functools
import importlib.util
from dataclasses import dataclass
from pathlib import Path

from nlp._common import DataError
from nlp._extras import MissingExtraError

__all__ = ["Confusions", "pycorrector_file", "load_confusions", "is_chinese_char"]

PYCORRECTOR_DATA = ("same_pinyin.txt", "same_stroke.txt", "common_char_set.txt", "sighan2015_test.tsv")


def is_chinese_char(c: str) -> bool:
    """A CJK unified ideograph (basic block or extension A): the only characters CSC changes."""
    return len(c) == 1 and ("\u4e00" <= c <= "\u9fff" or "\u3400" <= c <= "\u4dbf")


def pycorrector_file(name: str) -> Path:
    """The path of `pycorrector/data/<name>` inside the installed package (MissingExtraError
    naming the extra when pycorrector is not installed)."""
    spec = importlib.util.find_spec("pycorrector")
    if spec is None or not spec.submodule_search_locations:
        raise MissingExtraError("pycorrector", f"the text-correction data file {name}", extra="correction")
    path = Path(list(spec.submodule_search_locations)[0]) / "data" / name
    if not path.is_file():
        raise DataError(f"{path} is missing from the installed pycorrector; the text-correction task reads it "
                        "from pycorrector 1.1.4's wheel: pip install --force-reinstall --no-deps pycorrector==1.1.4")
    return path


@dataclass(frozen=True)
class Confusions:
    """Per character, the characters a writer confuses it with: same sound (pycorrector's file),
    same toneless syllable (pypinyin) and similar shape (pycorrector's file)."""

    sound: dict[str, tuple[str, ...]]
    homophone: dict[str, tuple[str, ...]]
    shape: dict[str, tuple[str, ...]]


@functools.lru_cache(maxsize=1)
def load_confusions() -> Confusions:
    """The sound and shape confusion sets over pycorrector's common characters, each candidate a
    common Chinese character other than the key; keys in a fixed (sorted) order."""
    common = {c for c in pycorrector_file("common_char_set.txt").read_text(encoding="utf-8") if is_chinese_char(c)}
    sound: dict[str, set[str]] = {}
    for line in _lines(pycorrector_file("same_pinyin.txt")):
        parts = line.split("\t")
        key = parts[0].strip()
        if not is_chinese_char(key):
            continue
        sound.setdefault(key, set()).update(c for p in parts[1:] for c in p.strip())
    homophone: dict[str, set[str]] = {}
    for group in _homophones(tuple(sorted(common))).values():
        for c in group:
            homophone.setdefault(c, set()).update(group)
    shape: dict[str, set[str]] = {}
    for line in _lines(pycorrector_file("same_stroke.txt")):
        group = [c for c in line.split("\t") if is_chinese_char(c.strip())]
        group = [c.strip() for c in group]
        for c in group:
            shape.setdefault(c, set()).update(group)

    def clean(table: dict[str, set[str]]) -> dict[str, tuple[str, ...]]:
        out = {}
        for key in sorted(table):
            cands = tuple(sorted(c for c in table[key] if c != key and c in common and is_chinese_char(c)))
            if cands and key in common:
                out[key] = cands
        return out

    return Confusions(sound=clean(sound), homophone=clean(homophone), shape=clean(shape))


def _lines(path: Path) -> list[str]:
    return [ln for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip() and not ln.startswith("#")]


def _homophones(chars: tuple[str, ...]) -> dict[str, set[str]]:
    """Toneless pinyin syllable -> the characters that can be read so (pypinyin, heteronyms)."""
    from pypinyin import Style, pinyin

    out: dict[str, set[str]] = {}
    for c in chars:
        for syllable in pinyin(c, style=Style.NORMAL, heteronym=True)[0]:
            if syllable and syllable.isalpha():
                out.setdefault(syllable, set()).add(c)
    return out
