import random

import pytest

from nlp.tasks.classification.metrics import classification_metrics, multilabel_metrics, regression_metrics


def test_worked_example():
    m = classification_metrics([0, 0, 1, 2], [0, 1, 1, 1], label_names=["neg", "pos", "mid"])
    assert m["accuracy"] == 0.5
    # neg: P 1 R .5 F 2/3; pos: P 1/3 R 1 F .5; mid: 0
    assert m["macro_f1"] == pytest.approx((2 / 3 + 0.5 + 0) / 3)
    assert m["per_class"]["pos"]["support"] == 1


def test_equals_sklearn_on_random_labels():
    sk = pytest.importorskip("sklearn.metrics")
    rng = random.Random(0)
    for _ in range(20):
        y = [rng.randrange(5) for _ in range(200)]
        p = [t if rng.random() < 0.6 else rng.randrange(6) for t in y]
        m = classification_metrics(y, p)
        assert m["accuracy"] == pytest.approx(sk.accuracy_score(y, p))
        assert m["macro_f1"] == pytest.approx(sk.f1_score(y, p, average="macro", zero_division=0))


def test_multilabel_and_regression_and_errors():
    m = multilabel_metrics([[1, 0], [1, 1]], [[1, 0], [0, 1]])
    assert m["subset_accuracy"] == 0.5 and m["micro_f1"] == pytest.approx(0.8)
    r = regression_metrics([1.0, 2.0, 3.0], [1.0, 2.0, 4.0])
    assert r["mse"] == pytest.approx(1 / 3) and 0.9 < r["pearson"] < 1.0
    with pytest.raises(ValueError, match="2 gold labels but 1"):
        classification_metrics([0, 1], [0])
