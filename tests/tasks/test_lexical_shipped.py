"""The shipped lexical model, ernie-tiny-zh-lexical (int8-row weights in nlp/assets): the default
of `word-segmentation`, `pos-tagging` and `lexical-analysis`, offline, through Python and the CLI;
its word F1 on held-out People's Daily sentences through the pipeline (raw text in)."""

from __future__ import annotations

import json

import pytest

import nlp
from cli_server import run_nlp
from nlp.tasks.lexical import POS_TAGS, SegmentationPipeline, lexical_metrics
from nlp.tasks.segmentation import WordSegmentationPipeline

TEXT = "江泽民在北京人民大会堂发表１９９８年新年讲话。"


@pytest.fixture(scope="module")
def seg():
    return nlp.pipeline("word-segmentation")


def test_word_segmentation_defaults_to_the_shipped_neural_model(seg):
    assert isinstance(seg, SegmentationPipeline) and type(seg.model).__name__ == "ErnieForLexicalAnalysis"
    words = [w["word"] for w in seg(TEXT)]
    assert words[:3] == ["江", "泽民", "在"] and "北京" in words and "讲话" in words  # PKU's standard: 江/泽民
    assert isinstance(nlp.pipeline("word-segmentation", model="jieba"), WordSegmentationPipeline)
    lac = nlp.pipeline("lexical-analysis")(TEXT)
    assert {"type": "PER", "text": "江泽民", "start": 0, "end": 3} in lac["entities"]
    assert {"type": "LOC", "text": "北京", "start": 4, "end": 6} in lac["entities"]
    assert all(w["pos"] in POS_TAGS for w in lac["words"])


def test_held_out_word_f1_through_the_pipeline(seg):
    """Raw test sentences in, words out (windows, offsets, decoding: what a user gets), against
    the gold words of the first 400 test sentences, with the shipped word lexicon and without it;
    the full-split figures are in docs/lexical.md."""
    from nlp.tasks import datasets as nds

    test = nds.load("peoples-daily-1998-lexical", "test").select(range(400))
    names = test.features["pos"].feature.names
    texts = ["".join(ws) for ws in test["words"]]
    assert seg.lexicon is not None and len(seg.lexicon) > 40000
    scores = {}
    for lexicon in (seg.lexicon, False):
        gold, pred = [], []
        pos = nlp.pipeline("pos-tagging", model=seg.model, tokenizer=seg.tokenizer, lexicon=lexicon)
        for ws, ps, out in zip(test["words"], test["pos"], pos(texts)):
            off, g = 0, []
            for w, p in zip(ws, ps):
                g.append((off, off + len(w), names[p]))
                off += len(w)
            gold.append(g)
            pred.append([(w["start"], w["end"], w["pos"]) for w in out])
        scores[lexicon is False] = m = lexical_metrics(gold, pred)
        assert m["word_f1"] > 0.93 and m["pos_accuracy"] > 0.93, m
    with_lexicon, without = scores[False], scores[True]
    # the shipped model on these 400 sentences: 0.9729 with its lexicon, 0.9718 without (the whole
    # split: 0.9655 and 0.9615)
    assert with_lexicon["word_f1"] > 0.97 and with_lexicon["word_f1"] > without["word_f1"] + 0.0005, (with_lexicon, without)


def test_predict_word_segmentation_with_no_model(tmp_path):
    path = tmp_path / "in.txt"
    path.write_text(TEXT + "\n\n", encoding="utf-8")
    rows = [json.loads(x) for x in run_nlp("predict", "--task", "word-segmentation", "--input", str(path)).stdout.splitlines()]
    assert rows[1] == {"text": "", "words": []}
    assert rows[0]["words"] == nlp.pipeline("word-segmentation")(TEXT)


def test_ascii_digits_and_latin_read_as_the_full_width_forms_it_was_trained_on(seg):
    """People's Daily 1998 writes "１９９８年" and "３．５％"; the tokenizer widens ASCII
    (`widen_ascii`), so today's "2024年" and "3.5%" are one word each, offsets on the text as given;
    before, "20" / "24年" and "3" / "." / "5" / "%"."""
    assert seg.tokenizer.widen_ascii
    text = "会议于2024年3月15日举行，GDP增长了3.5%。"
    words = [(w["word"], w["start"], w["end"]) for w in seg(text)]
    assert [w for w, _, _ in words] == ["会议", "于", "2024年", "3月", "15日", "举行", "，", "GDP", "增长", "了", "3.5%", "。"]
    assert all(text[s:e] == w for w, s, e in words)
    # held-out sentences with their digits, Latin letters and .%:/-+ in ASCII get the words of
    # the full-width originals, exactly (the word lexicon reads the widened characters too)
    from nlp.tasks import datasets as nds

    narrow = {o: o - 0xFEE0 for o in range(0xFF01, 0xFF5F) if chr(o - 0xFEE0).isalnum() or chr(o - 0xFEE0) in ".%:/-+"}
    texts = ["".join(ws) for ws in nds.load("peoples-daily-1998-lexical", "test").select(range(600))["words"]]
    changed = [t for t in texts if t.translate(narrow) != t]
    assert len(changed) > 150
    pos = nlp.pipeline("pos-tagging")

    def spans(texts):
        return [[(w["start"], w["end"], w["pos"]) for w in words] for words in pos(texts)]

    assert spans([t.translate(narrow) for t in changed]) == spans(changed)
