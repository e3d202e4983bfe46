"""One NER corpus's labelling conventions carried onto another, for strings the first labels
consistently.

MSRA NER and the NER read from People's Daily 1998's PKU tags disagree on what an entity is,
not only on where it is: PKU tags abbreviations as ``j`` (``中美/j``, ``十五大/j``, ``北约/j``), so
the PKU conversion leaves them unlabelled where MSRA labels them (中 LOC + 美 LOC, 十五大 ORG); PKU
splits organisation names into words (``中国/ns 共产党/n``: 中国 LOC) that MSRA labels whole
(中国共产党 ORG). A model trained on both learns both answers for the same text.

`convention_lexicon` reads the labelled corpus (MSRA's train split) for the strings it labels
the same way at most of their occurrences; `align_units` relabels a People's Daily sentence by
it, word by word. Only whole words (or runs of up to `MAX_WORDS` words) are matched, so the
locative 中 of ``在/p 会议/n 中/f`` is never a country: MSRA labels 中 as LOC at 7% of its
occurrences, under the share a string needs. A stretch whose own PKU entity reaches past it is
left alone, so no span is cut in two.

The candidates are the strings a People's Daily sentence offers as whole words: runs of words
that MSRA labels whole (`word_runs`: 中美, 中国共产党), and single words that hold an MSRA-labelled
stretch inside them (`holding_words`: 邓小平理论, where MSRA labels 邓小平 PER; 访华, its 华 LOC),
which PKU tags as one word with no entity. The lexicon keeps a word's whole tagging
(邓小平理论: B-PER I-PER I-PER O O), so the word is still matched whole.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

__all__ = ["MAX_WORDS", "labelled_stretches", "convention_lexicon", "word_runs", "holding_words", "align_units"]

MAX_WORDS = 6  # words per matched run: 全国/n 人民/n 代表/n 大会/n 常务/b 委员会/n is 6
MAX_CHARS = 14


def labelled_stretches(rows: Iterable[tuple[Sequence[str], Sequence[str]]]) -> set[str]:
    """Every maximal run of entity characters (tags other than O) in (characters, tags) rows:
    the strings the corpus ever labels, adjacent entities together (中美: 中 LOC, 美 LOC)."""
    out: set[str] = set()
    for chars, tags in rows:
        i = 0
        while i < len(tags):
            if tags[i] == "O":
                i += 1
                continue
            j = i
            while j < len(tags) and tags[j] != "O":
                j += 1
            if j - i <= MAX_CHARS:
                out.add("".join(chars[i:j]))
            i = j
    return out


def convention_lexicon(rows: Sequence[tuple[Sequence[str], Sequence[str]]], candidates: Iterable[str], *,
                       min_count: int = 3, min_share: float = 0.6) -> dict[str, tuple[str, ...]]:
    """For each candidate string, the tags the labelled rows give it, when one tagging labels
    something and covers at least `min_share` of the string's occurrences (and `min_count`).
    An occurrence inside a larger entity (its first tag I-, or an I- right after it) counts
    against every tagging: there the string is part of another name."""
    text = "\n".join("".join(chars) for chars, _ in rows) + "\n"
    tags: list[str] = []
    for _, row_tags in rows:
        tags.extend(row_tags)
        tags.append("O")
    lexicon: dict[str, tuple[str, ...]] = {}
    for s, starts in sorted(_occurrences(text, candidates).items()):
        seen = len(starts)
        taggings: Counter = Counter()
        for at in starts:
            end = at + len(s)
            if not tags[at].startswith("I-") and not tags[end].startswith("I-"):
                taggings[tuple(tags[at:end])] += 1
        if not taggings:
            continue
        tagging, count = taggings.most_common(1)[0]
        if any(t != "O" for t in tagging) and count >= min_count and count >= min_share * seen:
            lexicon[s] = tagging
    return lexicon


def _occurrences(text: str, strings: Iterable[str]) -> dict[str, list[int]]:
    """Where each of `strings` starts in `text` (overlapping occurrences too; strings that never
    occur are left out). One pass indexes the positions of the strings' first two characters,
    so thousands of candidates cost one scan of the text instead of one each."""
    strings = {s for s in strings if s}
    heads = {s[:2] for s in strings}
    at_head: dict[str, list[int]] = {}
    for i, char in enumerate(text):
        pair = text[i:i + 2]
        if char in heads:
            at_head.setdefault(char, []).append(i)
        if len(pair) == 2 and pair in heads:
            at_head.setdefault(pair, []).append(i)
    out = {}
    for s in strings:
        starts = [i for i in at_head.get(s[:2], ()) if text.startswith(s, i)]
        if starts:
            out[s] = starts
    return out


def word_runs(words: Sequence[str], within: set[str]) -> set[str]:
    """The strings of up to `MAX_WORDS` consecutive words that are in `within`."""
    out = set()
    for i in range(len(words)):
        s = ""
        for w in words[i:i + MAX_WORDS]:
            s += w
            if len(s) > MAX_CHARS:
                break
            if s in within:
                out.add(s)
    return out


def holding_words(words: Iterable[str], within: set[str]) -> set[str]:
    """The words that hold a string of `within` strictly inside them (邓小平理论 holds 邓小平, 访华
    holds 华): People's Daily words an MSRA entity is part of, which `word_runs` cannot offer."""
    out = set()
    for w in set(words):
        if len(w) > MAX_CHARS or w in within:
            continue
        if any(w[i:j] in within for i in range(len(w)) for j in range(i + 1, len(w) + 1) if j - i < len(w)):
            out.add(w)
    return out


def align_units(words: Sequence[str], tags: Sequence[str], lexicon: dict[str, tuple[str, ...]]
                ) -> tuple[list[str], list[str]]:
    """A sentence's character tags relabelled by `lexicon`, and the strings relabelled. `words`
    are its words in order, `tags` one BIO tag per character of them. Runs of words are matched
    left to right, longest first; a run whose tags already agree is kept as it is."""
    offsets = [0]
    for w in words:
        offsets.append(offsets[-1] + len(w))
    new = list(tags)
    changed = []
    i = 0
    while i < len(words):
        step = 1
        for k in range(min(i + MAX_WORDS, len(words)), i, -1):
            s = "".join(words[i:k])
            if s not in lexicon:
                continue
            a, b = offsets[i], offsets[k]
            if tags[a].startswith("I-") or (b < len(tags) and tags[b].startswith("I-")):
                continue  # an entity of the sentence's own reaches past this run
            if tuple(tags[a:b]) != lexicon[s]:
                new[a:b] = lexicon[s]
                changed.append(s)
            step = k - i
            break
        i += step
    return new, changed
