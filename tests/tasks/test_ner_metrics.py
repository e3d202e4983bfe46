"""NER tags and metrics: parity with seqeval on random, malformed, BIOES and real sequences."""

import random
import warnings

import pytest

seqeval_metrics = pytest.importorskip("seqeval.metrics")
from seqeval.metrics.sequence_labeling import get_entities as seqeval_get_entities  # noqa: E402
from seqeval.scheme import IOB2, IOBES  # noqa: E402

from nlp.tasks.ner.metrics import ner_metrics  # noqa: E402
from nlp.tasks.ner.tags import (  # noqa: E402
    convert_scheme,
    get_entities,
    get_entities_strict,
    repair_tags,
    tags_from_spans,
    validate_tags,
)

TAGS = ["O", "B-PER", "I-PER", "E-PER", "S-PER", "B-LOC", "I-LOC", "E-LOC", "S-LOC", "I-ORG", "B-ORG"]


def _random_corpus(rng, n, tags):
    return [[rng.choice(tags) for _ in range(rng.randint(0, 12))] for _ in range(n)]


def _seqeval(y_true, y_pred, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report = seqeval_metrics.classification_report(y_true, y_pred, output_dict=True, zero_division=0, **kw)
        return (seqeval_metrics.precision_score(y_true, y_pred, zero_division=0, **kw),
                seqeval_metrics.recall_score(y_true, y_pred, zero_division=0, **kw),
                seqeval_metrics.f1_score(y_true, y_pred, zero_division=0, **kw), report)


def _assert_equal(ours, theirs):
    p, r, f, report = theirs
    assert ours["precision"] == pytest.approx(p, abs=1e-12)
    assert ours["recall"] == pytest.approx(r, abs=1e-12)
    assert ours["f1"] == pytest.approx(f, abs=1e-12)
    for type_, scores in ours["per_type"].items():
        if scores["support"]:  # seqeval's report lists gold types only
            assert scores["f1"] == pytest.approx(report[type_]["f1-score"], abs=1e-12), type_
            assert scores["support"] == report[type_]["support"]


@pytest.mark.parametrize("seed", range(6))
def test_get_entities_equals_seqeval_on_random_malformed_sequences(seed):
    rng = random.Random(seed)
    for seq in _random_corpus(rng, 500, TAGS):
        assert get_entities(seq) == seqeval_get_entities(seq)


@pytest.mark.parametrize("seed", range(4))
def test_lenient_metrics_equal_seqeval_on_thousands_of_random_sequences(seed):
    rng = random.Random(100 + seed)
    gold = _random_corpus(rng, 1500, TAGS)
    # predictions: gold with a few tags flipped, so scores are neither 0 nor 1
    pred = [[t if rng.random() < 0.8 else rng.choice(TAGS) for t in s] for s in gold]
    _assert_equal(ner_metrics(gold, pred), _seqeval(gold, pred))


@pytest.mark.parametrize("scheme,seqeval_scheme,tags", [
    ("BIO", IOB2, ["O", "B-PER", "I-PER", "B-LOC", "I-LOC", "I-ORG"]),
    ("BIOES", IOBES, TAGS),
])
def test_strict_metrics_equal_seqeval_strict(scheme, seqeval_scheme, tags):
    rng = random.Random(7)
    gold = _random_corpus(rng, 1500, tags)
    pred = [[t if rng.random() < 0.8 else rng.choice(tags) for t in s] for s in gold]
    ours = ner_metrics(gold, pred, mode="strict", scheme=scheme)
    _assert_equal(ours, _seqeval(gold, pred, mode="strict", scheme=seqeval_scheme))


def test_metrics_equal_seqeval_on_real_peoples_daily_tags(peoples_daily):
    test = peoples_daily["test"].select(range(1500))
    names = test.features["ner_tags"].feature.names
    gold = [[names[i] for i in row] for row in test["ner_tags"]]
    rng = random.Random(3)
    # realistic errors: drop an entity's B- (malformed I- start), shift types, add noise
    pred = []
    for seq in gold:
        out = list(seq)
        for k, t in enumerate(out):
            if t.startswith("B-") and rng.random() < 0.1:
                out[k] = "O"
            elif t.startswith("I-") and rng.random() < 0.05:
                out[k] = "I-ORG"
            elif t == "O" and rng.random() < 0.01:
                out[k] = "B-LOC"
        pred.append(out)
    ours = ner_metrics(gold, pred)
    _assert_equal(ours, _seqeval(gold, pred))
    assert 0.5 < ours["f1"] < 1.0
    assert set(ours["per_type"]) == {"LOC", "ORG", "PER"}


def test_worked_example_and_errors():
    gold = [["B-PER", "I-PER", "O", "B-LOC"]]
    pred = [["B-PER", "I-PER", "O", "B-ORG"]]
    m = ner_metrics(gold, pred)
    assert (m["precision"], m["recall"], m["f1"]) == (0.5, 0.5, 0.5)
    assert m["per_type"]["ORG"] == {"precision": 0.0, "recall": 0.0, "f1": 0.0, "support": 0}
    with pytest.raises(ValueError, match="sequence 0: 2 gold tags but 1"):
        ner_metrics([["O", "O"]], [["O"]])


def test_bio_bioes_round_trip_and_repair():
    bio = ["B-PER", "I-PER", "O", "B-LOC", "O", "B-ORG", "I-ORG", "I-ORG"]
    bioes = convert_scheme(bio, "BIOES")
    assert bioes == ["B-PER", "E-PER", "O", "S-LOC", "O", "B-ORG", "I-ORG", "E-ORG"]
    assert convert_scheme(bioes, "BIO") == bio
    bad = ["O", "I-PER", "I-PER", "B-LOC", "I-ORG"]
    problems = validate_tags(bad, "BIO")
    assert [p.split(":")[0] for p in problems] == ["position 1", "position 2", "position 4"]
    fixed = repair_tags(bad, "BIO")
    assert fixed == ["O", "B-PER", "I-PER", "B-LOC", "B-ORG"]
    assert validate_tags(fixed, "BIO") == []
    assert get_entities(fixed) == get_entities(bad)  # repair keeps the lenient entities
    assert validate_tags(["B-X", "I-X"], "BIOES")  # BIOES needs E-X
    assert get_entities_strict(["B-X", "I-X"], "BIOES") == []
    with pytest.raises(ValueError, match="overlaps"):
        tags_from_spans([("A", 0, 2), ("B", 2, 3)], 4)


@pytest.fixture(scope="module")
def peoples_daily(datasets_cache):
    from nlp.tasks.datasets.builtin import load_builtin

    dsd, _ = load_builtin("peoples-daily-1998-ner", datasets_cache)
    return dsd


def test_the_task_reports_each_type_beside_the_overall_scores():
    # what `nlp evaluate`, the trainer's evaluations and results.json get: "f1/ORG" and its
    # precision and recall next to the micro scores, as extraction names them
    import numpy as np

    from nlp.tasks.registry import get_task

    names = ["O", "B-LOC", "I-LOC", "B-ORG", "I-ORG", "B-PER", "I-PER"]
    gold = np.array([5, 6, 0, 1, 2, 0, 3, 4, -100])
    pred = np.array([5, 6, 0, 1, 2, 0, 1, 2, 0])  # the ORG read as a LOC
    scores = get_task("ner").score([pred], [gold], label_names=names, examples=None, features=None, data=None)
    assert scores["f1/PER"] == 1.0 and scores["recall/ORG"] == 0.0 and scores["precision/LOC"] == 0.5
    assert scores["f1/LOC"] == pytest.approx(2 / 3) and scores["f1"] == pytest.approx(2 / 3)
    assert set(scores) == {"precision", "recall", "f1"} | {f"{m}/{t}" for m in ("precision", "recall", "f1")
                                                           for t in ("LOC", "ORG", "PER")}
