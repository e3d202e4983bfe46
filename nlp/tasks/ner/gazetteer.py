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

import copy
import logging
from collections import Counter
from collections.abc import Iterator, Sequence
from typing import Any

from nlp._common import ConfigError
from nlp.tasks.ner.tags import get_entities
from nlp.tokenizer.gazetteer import MAX_WORD_LENGTH, Gazetteer

__all__ = ["FOLDS", "TRAIN_TYPE_PREFIX", "EntityGazetteers", "entity_counts_by_fold", "prepare_gazetteer"]

logger = logging.getLogger(__name__)

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


def prepare_gazetteer(tokenizer: Any, train: Any, label_names: Sequence[str] | None, settings: Any,
                      label_column: str) -> Iterator[tuple[range, Any]] | None:
    """A recipe's `task.gazetteer` (and, for NER, `task.gazetteer_train_entities`) put on the
    tokenizer, which is saved with it, so every later use of the model computes the same token
    type ids (TaskSpec.prepare_tokenizer). A tokenizer that already carries another one (a model
    trained with it) is refused: its token type rows mean that one's words. With the training
    entities, returns the training rows fold by fold, each fold with a copy of the tokenizer whose
    gazetteer holds the other folds' entities (built as the folds are featurized, one at a time)."""
    name, entities = getattr(settings, "gazetteer", None), getattr(settings, "gazetteer_train_entities", False)
    if name is None and not entities:
        if tokenizer.gazetteer is not None and any(t.startswith(TRAIN_TYPE_PREFIX) for t in tokenizer.gazetteer.types):
            logger.warning("the model's gazetteer holds the entities of the data it was trained on (%s* types): "
                           "training on that data again, every row finds its own entities there; to have each "
                           "row see only the other folds' entities, repeat the task section's gazetteer and "
                           "gazetteer_train_entities: true", TRAIN_TYPE_PREFIX)
        return None
    base = Gazetteer.named(name) if name is not None else None
    folds = EntityGazetteers(base, train["tokens"], train[label_column], label_names or []) if entities else None
    gazetteer = folds.full if folds is not None else base
    if tokenizer.gazetteer is not None and tokenizer.gazetteer != gazetteer:
        raise ConfigError(f"the task section's gazetteer ({gazetteer!r}) differs from the one the model was "
                          f"trained with ({tokenizer.gazetteer!r}); drop task.gazetteer to keep that one, or "
                          "start from a model trained without one")
    tokenizer.gazetteer = gazetteer
    return None if folds is None else _fold_tokenizers(tokenizer, folds, len(train))


def _fold_tokenizers(tokenizer: Any, folds: EntityGazetteers, rows: int) -> Iterator[tuple[range, Any]]:
    for f in range(FOLDS):
        seen = copy.copy(tokenizer)
        seen.gazetteer = folds.fold(f)
        yield range(f, rows, FOLDS), seen
