"""Post-processing: QA n-best over all windows back to the context; NER tags -> entities."""

from __future__ import annotations

import numpy as np
import pytest

from nlp._common import DataError
from nlp.tasks.ner.postprocess import tags_to_entities
from nlp.tasks.qa.postprocess import postprocess_qa

CTX = "张三在北京工作，李四在上海读书。"


def _features():
    # Two windows of one context: window 0 covers chars 0..8, window 1 chars 5..15.
    # Token 0 is [CLS], tokens 1-2 the question, then context tokens one per character.
    w0 = [None, None, None] + [[i, i + 1] for i in range(9)] + [None]
    w1 = [None, None, None] + [[i, i + 1] for i in range(5, 16)] + [None]
    return {"example_id": ["e", "e"], "offset_mapping": [w0, w1]}


def _logits(feats, picks):
    T = max(len(o) for o in feats["offset_mapping"])
    start = np.full((2, T), -5.0)
    end = np.full((2, T), -5.0)
    for (row, s, e, value) in picks:
        start[row, s] = value
        end[row, e] = value
    return start, end


def test_best_span_comes_from_any_window_and_maps_to_the_context():
    feats = _features()
    # window 0 likes 北京 (chars 3-4 = tokens 6-7); window 1 likes 上海 (chars 11-12 = tokens 9-10) more
    start, end = _logits(feats, [(0, 6, 7, 2.0), (1, 9, 10, 3.0)])
    pred = postprocess_qa({"id": ["e"], "context": [CTX]}, feats, start, end)["e"]
    assert pred["text"] == "上海" and (pred["start"], pred["end"]) == (11, 13)
    assert CTX[pred["start"]:pred["end"]] == pred["text"]
    assert [c["text"] for c in pred["n_best"][:2]] == ["上海", "北京"]
    assert 0 < pred["score"] <= 1


def test_max_answer_length_and_never_the_question():
    feats = _features()
    # a long span (tokens 3..12 of window 1 = 10 chars) beats everything unless limited;
    # the question tokens (1, 2) have the highest logits but no offsets
    start, end = _logits(feats, [(1, 3, 12, 4.0), (0, 6, 7, 1.0), (0, 1, 2, 9.0)])
    long = postprocess_qa({"id": ["e"], "context": [CTX]}, feats, start, end, max_answer_length=30)["e"]
    assert long["text"] == CTX[5:15]
    short = postprocess_qa({"id": ["e"], "context": [CTX]}, feats, start, end, max_answer_length=3)["e"]
    assert short["text"] == "北京"


def test_null_answer_when_cls_wins_by_more_than_the_threshold():
    feats = _features()
    start, end = _logits(feats, [(0, 6, 7, 1.0), (0, 0, 0, 3.0), (1, 0, 0, 3.0)])
    ex = {"id": ["e"], "context": [CTX]}
    assert postprocess_qa(ex, feats, start, end)["e"]["text"] == "北京"  # SQuAD 1: always a span
    assert postprocess_qa(ex, feats, start, end, allow_impossible=True)["e"]["text"] == ""
    # null score 6 vs best span 2: a threshold of 5 keeps the span
    kept = postprocess_qa(ex, feats, start, end, allow_impossible=True, null_threshold=5.0)["e"]
    assert kept["text"] == "北京" and kept["null_score"] == 6.0


def test_qa_mismatched_inputs():
    feats = _features()
    start, end = _logits(feats, [])
    with pytest.raises(DataError, match="2 features but 1 start"):
        postprocess_qa({"id": ["e"], "context": [CTX]}, feats, start[:1], end[:1])
    with pytest.raises(DataError, match="'f' has no features"):
        postprocess_qa({"id": ["f"], "context": [CTX]}, feats, start, end)


def test_ner_entities_with_offsets_and_scores():
    text = "张三 在北京工作"
    spans = [(i, i + 1) for i, c in enumerate(text) if not c.isspace()]
    tags = ["B-PER", "I-PER", "O", "B-LOC", "I-LOC", "O", "I-ORG"]
    scores = [0.9, 0.7, 1.0, 0.8, 0.6, 1.0, 0.5]
    ents = tags_to_entities(text, tags, spans, scores)
    assert [(e["type"], e["text"], e["start"], e["end"]) for e in ents] == [
        ("PER", "张三", 0, 2), ("LOC", "北京", 4, 6), ("ORG", "作", 7, 8)]  # lenient: I- starts one
    assert ents[0]["score"] == pytest.approx(0.8)
    assert all(text[e["start"]:e["end"]] == e["text"] for e in ents)
    with pytest.raises(DataError, match="must match"):
        tags_to_entities(text, tags[:3], spans)
