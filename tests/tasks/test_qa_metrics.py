"""CMRC2018 EM/F1 as the official cmrc2018_evaluate.py computes them, on hand-worked cases."""

import pytest

from nlp.tasks.qa.metrics import cmrc2018_metrics, cmrc_em, cmrc_f1, find_lcs, mixed_segmentation


def test_mixed_segmentation_splits_chinese_and_keeps_english_runs():
    assert mixed_segmentation("1998年NBA总冠军") == ["1998", "年", "nba", "总", "冠", "军"]
    # official punctuation list: removed with rm_punc, a separate segment otherwise
    assert mixed_segmentation("《红楼梦》") == ["《", "红", "楼", "梦", "》"]
    assert mixed_segmentation("《红楼梦》", rm_punc=True) == ["红", "楼", "梦"]
    # Treebank splits ASCII punctuation that is not in the official list
    assert mixed_segmentation("iPhone 4S, 2010.") == ["iphone", "4s", ",", "2010", "."]


def test_lcs_is_contiguous_not_bag_overlap():
    assert find_lcs(list("abcxde"), list("abde")) == (list("ab"), 2)


def test_f1_worked_examples():
    # gold 北京大学 (4 segs), prediction 北京 (2): lcs 2 -> P 1, R 0.5, F1 2/3
    assert cmrc_f1(["北京大学"], "北京") == pytest.approx(2 / 3)
    # gold 1998年 = ["1998","年"], pred 在1998年 = ["在","1998","年"]: P 2/3, R 1 -> 0.8
    assert cmrc_f1(["1998年"], "在1998年") == pytest.approx(0.8)
    # contiguous: gold 中华人民共和国 (7), pred 中华共和国 (5): lcs 共和国 = 3 -> P 3/5, R 3/7
    p, r = 3 / 5, 3 / 7
    assert cmrc_f1(["中华人民共和国"], "中华共和国") == pytest.approx(2 * p * r / (p + r))
    # best over references; punctuation does not count
    assert cmrc_f1(["上海", "“北京”"], "北京") == 1.0
    assert cmrc_f1(["北京"], "上海") == 0.0


def test_em_removes_official_punctuation_only():
    assert cmrc_em(["《红楼梦》"], "红楼梦") == 1.0
    assert cmrc_em(["Beijing"], "beijing ") == 1.0  # lower-cased and stripped
    assert cmrc_em(["红楼梦"], "红楼梦。") == 1.0
    assert cmrc_em(["红楼梦"], "红楼梦.") == 0.0  # an ASCII period is not in the list
    assert cmrc_em(["红楼梦"], "《红楼》") == 0.0


def test_corpus_scores_count_missing_predictions_as_zero():
    refs = [
        {"id": "q1", "answers": {"text": ["北京大学", "北大"], "answer_start": [0, 0]}},
        {"id": "q2", "answers": ["1998年"]},
        {"id": "q3", "answers": ["上海"]},
    ]
    preds = {"q1": "北大", "q2": "在1998年"}
    m = cmrc2018_metrics(preds, refs)
    assert m["total"] == 3 and m["skipped"] == 1
    assert m["exact_match"] == pytest.approx(100 / 3)
    assert m["f1"] == pytest.approx(100 * (1 + 0.8) / 3)
    assert m["average"] == pytest.approx((m["exact_match"] + m["f1"]) / 2)


def test_unanswerable_extension():
    assert cmrc_f1([], "") == 1.0 and cmrc_em([], "北京") == 0.0
