"""NER predictions written as training data (`nlp predict --format training`): CoNLL lines that
`read_conll` reads back to the same entities, that join a split through `data.extra_train` in
that split's tag scheme, and results that cannot be written named instead of written wrong."""

from __future__ import annotations

import json

import pytest
from cli_server import run_nlp

from nlp._common import DataError
from nlp.tasks.ner.data import read_conll
from nlp.tasks.ner.tags import get_entities
from nlp.tasks.registry import get_task

SPEC = get_task("ner")


def _result(text, *entities):
    return {"text": text, "entities": [{"type": t, "text": text[a:b], "start": a, "end": b} for t, a, b in entities]}


def test_a_result_is_one_character_a_line_without_white_space():
    line = SPEC.training_line(_result(" 去 New York\u3000见李鹏", ("LOC", 3, 11), ("PER", 13, 15)))
    assert line == "去\tO\nN\tB-LOC\ne\tI-LOC\nw\tI-LOC\nY\tI-LOC\no\tI-LOC\nr\tI-LOC\nk\tI-LOC\n见\tO\n李\tB-PER\n鹏\tI-PER\n"
    # an entity opening on white space opens on its first character kept
    assert SPEC.training_line(_result("在 北京", ("LOC", 1, 4))) == "在\tO\n北\tB-LOC\n京\tI-LOC\n"
    assert SPEC.training_line({"text": "", "entities": []}) == ""  # a blank input line: a blank line


@pytest.mark.parametrize("entities, why", [
    ([("LOC", 2, 9)], "is outside the text of 4 characters"),
    ([("LOC", 2, 2)], "is outside the text"),
    ([("LOC", 0, 2), ("PER", 1, 3)], "overlaps another entity"),
    ([("NEW PLACE", 0, 2)], "which a tag column cannot hold"),
    ([("LOC", 1, 2)], "holds only white space"),
])
def test_a_result_that_cannot_be_written_says_why(entities, why):
    with pytest.raises(DataError, match=why):
        SPEC.training_line(_result("北 京市", *entities))


def test_lines_written_by_nlp_predict_read_back_to_the_predicted_entities(tmp_path):
    texts = ["国务院总理李鹏昨天在北京会见了美国客人。", "", "新华社 上海电　复旦大学的王教授说。"]
    path = tmp_path / "news.txt"
    path.write_text("\n".join(texts) + "\n", encoding="utf-8")
    out = tmp_path / "silver.conll"
    done = run_nlp("predict", "--task", "ner", "--input", str(path), "--format", "training", "--output", str(out))
    assert "left blank" not in done.stderr
    predicted = [json.loads(x)["entities"] for x in
                 run_nlp("predict", "--task", "ner", "--input", str(path)).stdout.splitlines()]
    back = read_conll(out)  # the blank input line is skipped: two sentences
    names = back.features["ner_tags"].feature.names
    assert len(back) == 2 and sum(map(len, predicted)) >= 6
    for row, text, entities in zip(back, [texts[0], texts[2]], [predicted[0], predicted[2]]):
        kept = [i for i, c in enumerate(text) if not c.isspace()]
        assert row["tokens"] == [text[i] for i in kept]
        spans = get_entities([names[i] for i in row["ner_tags"]])
        assert [(t, kept[a], kept[b] + 1) for t, a, b in spans] == [(e["type"], e["start"], e["end"]) for e in entities]


def test_bio_lines_join_a_bioes_split_in_its_scheme(tmp_path):
    import datasets

    from nlp.train.finetune import _with_extra_train
    from nlp.train.recipe import recipe_from_dict

    names = ["O", "B-LOC", "I-LOC", "E-LOC", "S-LOC", "B-PER", "I-PER", "E-PER", "S-PER"]
    features = datasets.Features({"tokens": datasets.Sequence(datasets.Value("string")),
                                  "ner_tags": datasets.Sequence(datasets.ClassLabel(names=names))})
    train = datasets.Dataset.from_dict({"tokens": [list("去北京")], "ner_tags": [[0, 1, 3]]}, features=features)
    extra = tmp_path / "teacher.conll"
    extra.write_text(SPEC.training_line(_result("李鹏到京", ("PER", 0, 2), ("LOC", 3, 4))), encoding="utf-8")
    recipe = recipe_from_dict({"task": {"name": "token-classification"}, "model": {"name": "x"},
                               "data": {"dataset": "zh-ner", "extra_train": [str(extra)]}})
    joined, _ = _with_extra_train(SPEC, recipe.data, train, "zh-ner")
    # B-PER I-PER, B-LOC in the file: B-PER E-PER, S-LOC in the split's scheme, not read as they are
    assert [names[i] for i in joined["ner_tags"][1]] == ["B-PER", "E-PER", "O", "S-LOC"]
