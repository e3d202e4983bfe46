"""The entities of a NER training split as gazetteer words (`task.gazetteer_train_entities`).

Every entity string of two or more characters is a word typed `train-<its entity type>` (the type
it has most often), added to the recipe's gazetteer (`task.gazetteer`, a dictionary: jieba's or
a file) so that the model also learns how far to trust a string the training data labelled.
Single characters are left out: 中 is a country in 中美 and a preposition in 会议中, so a gazetteer
could only mark every 中 the same way. The words stay separate types from the dictionary's (a
name the training data labelled is surer than one a dictionary tags), and where both list a
word the training data's type wins.

Training rows must not see their own entities in the gazetteer: every training entity would then
be matched, and the model would learn to trust the gazetteer blindly, then meet test text where
only the entities seen in training are. So the split is cut into FOLDS folds (row i in fold
i mod FOLDS) and each fold's rows are featurized with the entities of the other folds only,
while the saved gazetteer (what dev, test and every later use see) holds them all. Measured on
zh-ner-msra (docs/training.md, "Gazetteer features"): without the folds the training entities
cost MSRA test F1 against jieba's dictionary alone; with them they add to it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from nlp.tasks.ner.tags import get_entities
from nlp.tokenizer.gazetteer import MAX_WORD_LENGTH, Gazetteer

__all__ = ["FOLDS", "TRAIN_TYPE_PREFIX", "EntityGazetteers", "entity_counts_by_fold"]

FOLDS = 5
TRAIN_TYPE_PREFIX = "train-"
MIN_ENTITY_LENGTH = 2


def entity_counts_by_fold(tokens: Sequence[Sequence[str]], tags: Sequence[Sequence[int]],
                          label_names: Sequence[str], *, max_length: int) -> list[Counter]:
    """Per fold, how often each (entity string, type) occurs in its rows."""
    counts = [Counter() for _ in range(FOLDS)]
    for i, (words, row_tags) in enumerate(zip(tokens, tags)):
        for type_, begin, end in get_entities([label_names[t] for t in row_tags]):
            text = "".join(words[begin:end + 1])
            if MIN_ENTITY_LENGTH <= len(text) <= max_length:
                counts[i % FOLDS][text, type_] += 1
    return counts


class EntityGazetteers:
    """The recipe's gazetteer (`base`, may be None) plus a training split's entities: `full` (all
    folds: what the model is saved with) and `fold(f)` (the other folds': fold f's rows)."""

    def __init__(self, base: Gazetteer | None, tokens: Sequence[Sequence[str]], tags: Sequence[Sequence[int]],
                 label_names: Sequence[str]) -> None:
        self.base = base
        self.max_word_length = base.max_word_length if base is not None else MAX_WORD_LENGTH
        self.counts = entity_counts_by_fold(tokens, tags, label_names, max_length=self.max_word_length)
        entity_types = sorted({TRAIN_TYPE_PREFIX + t for c in self.counts for _, t in c})
        self.types = (*(base.types if base is not None else ()), *entity_types)

    @property
    def full(self) -> Gazetteer:
        return self._with(range(FOLDS))

    def fold(self, f: int) -> Gazetteer:
        return self._with(g for g in range(FOLDS) if g != f)

    def _with(self, folds) -> Gazetteer:
        total: Counter = Counter()
        for g in folds:
            total.update(self.counts[g])
        best: dict[str, tuple[int, str]] = {}
        for (word, type_), n in sorted(total.items()):  # sorted: ties go to the first type by name
            if word not in best or n > best[word][0]:
                best[word] = (n, type_)
        words = dict(self.base.words) if self.base is not None else {}
        words.update({w: TRAIN_TYPE_PREFIX + t for w, (_, t) in best.items()})
        return Gazetteer(words, self.types, max_word_length=self.max_word_length)
