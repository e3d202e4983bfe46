"""A NER training split's entities as gazetteer words (nlp/tasks/ner/gazetteer.py), and the
training rows featurized fold by fold, each fold seeing only the other folds' entities."""

from __future__ import annotations

import datasets

from nlp.tasks.ner.gazetteer import FOLDS, EntityGazetteers, entity_counts_by_fold
from nlp.tokenizer import Gazetteer

LABELS = ["O", "B-LOC", "I-LOC", "B-ORG", "I-ORG", "B-PER", "I-PER"]


def _row(text: str, spans: dict[str, str]) -> tuple[list[str], list[int]]:
    """Characters and tags with each `spans` string (its first occurrence) tagged with its type."""
    tags = [0] * len(text)
    for word, type_ in spans.items():
        at = text.index(word)
        tags[at] = LABELS.index("B-" + type_)
        for k in range(at + 1, at + len(word)):
            tags[k] = LABELS.index("I-" + type_)
    return list(text), tags


ROWS = [_row("张三去北京", {"张三": "PER", "北京": "LOC"}),    # fold 0
        _row("李四在新华社", {"李四": "PER", "新华社": "ORG"}),  # fold 1
        _row("中美会谈", {"中": "LOC", "美": "LOC"}),          # fold 2: one-character entities
        _row("北京大学", {"北京大学": "ORG"}),                  # fold 3
        _row("北京很冷", {"北京": "ORG"}),                      # fold 4: 北京 once more, another type
        _row("到北京", {"北京": "LOC"})]                        # fold 0 again


def test_entities_are_counted_per_fold_and_typed_by_their_most_frequent_type():
    tokens, tags = [r[0] for r in ROWS], [r[1] for r in ROWS]
    counts = entity_counts_by_fold(tokens, tags, LABELS, max_length=12)
    assert len(counts) == FOLDS
    assert counts[0] == {("张三", "PER"): 1, ("北京", "LOC"): 2} and counts[2] == {}  # 中, 美: too short
    base = Gazetteer({"北京": "LOC", "长城": "LOC", "新华社": "ORG"}, ("LOC", "ORG"))
    folds = EntityGazetteers(base, tokens, tags, LABELS)
    assert folds.types == ("LOC", "ORG", "train-LOC", "train-ORG", "train-PER")
    full = folds.full
    assert full.words == {"北京": "train-LOC", "长城": "LOC", "新华社": "train-ORG", "张三": "train-PER",
                          "李四": "train-PER", "北京大学": "train-ORG"}
    # fold 0 holds 北京 twice as LOC: without it, 北京's one ORG of fold 4 decides
    assert folds.fold(0).words == {"北京": "train-ORG", "长城": "LOC", "新华社": "train-ORG", "李四": "train-PER",
                                   "北京大学": "train-ORG"}
    # fold 1's own entities are the dictionary's again, or gone
    assert folds.fold(1).words["新华社"] == "ORG" and "李四" not in folds.fold(1).words
    assert all(folds.fold(f).types == full.types for f in range(FOLDS))  # one id per type in every fold
    assert EntityGazetteers(None, tokens, tags, LABELS).types == ("train-LOC", "train-ORG", "train-PER")


def test_the_tokenizer_gets_every_entity_and_each_fold_of_rows_the_others_entities(tmp_path, caplog):
    """prepare_gazetteer (TokenClassificationSpec.prepare_tokenizer): the tokenizer carries the full
    gazetteer; the training rows come back fold by fold (every row once), each fold with a copy of
    the tokenizer whose gazetteer is that fold's; a model's own different gazetteer is refused."""
    import copy
    from types import SimpleNamespace

    import pytest

    from nlp._common import ConfigError
    from nlp.tasks.ner.gazetteer import prepare_gazetteer

    tokens, tags = [r[0] for r in ROWS], [r[1] for r in ROWS]
    train = datasets.Dataset.from_dict({"tokens": tokens, "ner_tags": tags})
    folds = EntityGazetteers(None, tokens, tags, LABELS)

    class Tok:
        gazetteer = None

    tok = Tok()
    settings = SimpleNamespace(gazetteer=None, gazetteer_train_entities=True)
    groups = list(prepare_gazetteer(tok, train, LABELS, settings, "ner_tags"))
    assert tok.gazetteer == folds.full
    assert sorted(i for rows, _ in groups for i in rows) == list(range(len(ROWS)))
    for f, (rows, seen) in enumerate(groups):
        assert list(rows) == list(range(f, len(ROWS), FOLDS)) and seen.gazetteer == folds.fold(f)
    assert list(groups[0][0]) == [0, 5] and "张三" not in groups[0][1].gazetteer.words
    # no settings: nothing to do; a model trained with training entities says what that means
    assert prepare_gazetteer(tok, train, LABELS, SimpleNamespace(gazetteer=None), "ner_tags") is None
    assert "holds the entities of the data it was trained on" in caplog.text
    names = tmp_path / "names.tsv"
    names.write_text("北京\tLOC\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="differs from the one the model was trained with"):
        prepare_gazetteer(copy.copy(tok), train, LABELS, SimpleNamespace(gazetteer=str(names)), "ner_tags")
    plain = Tok()
    assert prepare_gazetteer(plain, train, LABELS, SimpleNamespace(gazetteer=str(names)), "ner_tags") is None
    assert plain.gazetteer == Gazetteer.read(names)
