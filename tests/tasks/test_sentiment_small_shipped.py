"""The shipped compressed sentiment model, ernie-tiny-zh-sentiment-small (int8-row weights in
nlp/assets; made by width pruning and distillation, docs/compress.md): it loads offline by name as
the pruned shape, labels reviews through the pipeline, and keeps its accuracy on held-out reviews."""

from __future__ import annotations

import numpy as np
import pytest

import nlp

NAME = "ernie-tiny-zh-sentiment-small"


@pytest.fixture(scope="module")
def clf():
    return nlp.pipeline("text-classification", model=NAME)


def test_it_loads_offline_as_two_narrow_layers(clf):
    cfg = clf.model.config
    assert (cfg.num_hidden_layers, cfg.num_attention_heads, cfg.attention_head_size, cfg.intermediate_size) == \
        (2, 2, 64, 512) and cfg.hidden_size == 256
    out = clf(["这家餐厅的服务非常好，菜也很新鲜，下次还来。", "质量太差了，用了两天就坏了，再也不买了。"])
    assert [r[0]["label"] for r in out] == ["positive", "negative"]  # the top label of each


def test_held_out_accuracy_through_the_pipeline(clf):
    """Raw test reviews in, labels out, on the first 400 reviews-zh test reviews (the whole split's
    figure, 0.8561 as trained, is in the model's README and docs/compress.md)."""
    from nlp.tasks import datasets as nds

    test = nds.load("reviews-zh", "test").select(range(400))
    names = test.features["label"].names
    predicted = [r[0]["label"] for r in clf(list(test["text"]))]
    accuracy = float(np.mean([p == names[y] for p, y in zip(predicted, test["label"])]))
    assert accuracy > 0.82, accuracy
