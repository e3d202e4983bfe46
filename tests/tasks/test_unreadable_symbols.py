"""Symbols the tokenizer cannot read (emoji, flags, private-use characters: nlp/tasks/unreadable.py)
are in no entity and are words of their own: the shipped models read [UNK] as a rare name
character, and tagged 😀 as a person and 鹏👍 as one word before."""

from __future__ import annotations

import numpy as np
import pytest

import nlp
from nlp._common import DataError
from nlp.tasks.unreadable import PINNED_LOGIT, KnownCharacters, UnreadableSymbols, pin_rows


@pytest.fixture(scope="module")
def ner():
    return nlp.pipeline("ner")


@pytest.fixture(scope="module")
def lac():
    return nlp.pipeline("lexical-analysis")


def entities(pipe, text):
    return [(e["type"], e["text"], e["start"], e["end"]) for e in pipe(text)]


def test_only_symbols_outside_the_vocabulary_are_unreadable(ner):
    symbols = UnreadableSymbols(ner.tokenizer)
    # 😀, ⚽ and an unassigned code point are [UNK] and not letters; 李 is in the vocabulary; 𠀀 is
    # [UNK] but a letter (it may be part of a name); ★ and ℃ are symbols the vocabulary has; the
    # tokenizer drops a private-use character (no token: nothing to tag)
    unk = ner.tokenizer.unk_token_id
    assert ner.tokenizer([[c] for c in "𠀀⚽\u0378\ue000"], is_split_into_words=True,
                         add_special_tokens=False)["input_ids"] == [[unk], [unk], [unk], []]
    assert symbols.mask(list("😀李𠀀★℃⚽\u0378\ue000")).tolist() == [True, False, False, False, False, True, True,
                                                                  False]
    assert symbols.mask(list("李鹏在北京")) is None
    assert symbols.mask([]) is None


def test_the_verdicts_stay_bounded(ner, monkeypatch):
    monkeypatch.setattr("nlp.tasks.unreadable._VERDICT_LIMIT", 4)
    symbols, known = UnreadableSymbols(ner.tokenizer), KnownCharacters(ner.tokenizer)
    assert symbols.mask(list("李鹏😀")).tolist() == [False, False, True]
    # past the limit it forgets and relearns, 李 (known before) too
    assert symbols.mask(list("李北京⚽")).tolist() == [False, False, False, True]
    assert len(symbols._verdict) <= 4
    assert not known.any_in("😀⚽") and known.any_in("北京上海⚽") and len(known._known) <= 5


def test_a_tokenizer_without_an_unknown_token_has_no_unreadable_symbols():
    class NoUnk:
        unk_token_id = None

    assert UnreadableSymbols(NoUnk()).mask(list("😀李")) is None


def test_pinning_leaves_one_label_possible():
    scores = np.array([[3.0, 1.0, 2.0], [0.5, 9.0, 1.0]], dtype=np.float32)
    pin_rows(scores, np.array([False, True]), 2)
    assert scores.tolist() == [[3.0, 1.0, 2.0], [PINNED_LOGIT, PINNED_LOGIT, 0.0]]


def test_the_ner_default_puts_no_emoji_in_an_entity(ner):
    assert entities(ner, "😀😀李鹏😀") == [("PER", "李鹏", 2, 4)]
    assert entities(ner, "李鹏👍在北京开会") == [("PER", "李鹏", 0, 2), ("LOC", "北京", 4, 6)]
    assert entities(ner, "😀") == []
    assert entities(ner, "我爱北京天安门🇨🇳") == [("LOC", "北京", 2, 4), ("LOC", "天安门", 4, 7)]
    assert entities(ner, "\ue000李鹏") == [("PER", "李鹏", 1, 3)]


def test_the_same_holds_across_the_windows_of_a_long_text(ner):
    text = "国务院总理李鹏😀昨天在北京👍会见了美国客人。" * 60  # many overlapping windows
    found = ner(text)
    assert len(text) > 4 * ner.max_length
    assert found and not any(c in e["text"] for e in found for c in "😀👍")
    assert [e["text"] for e in found[:4]] == ["国务院", "李鹏", "北京", "美国"]
    assert {e["text"] for e in found} == {"国务院", "李鹏", "北京", "美国"}


def test_the_lexical_default_makes_each_unreadable_symbol_a_word_of_pos_w(lac):
    got = lac("李鹏👍在北京开会")
    assert ("👍", 2, 3, "w") in [(w["word"], w["start"], w["end"], w["pos"]) for w in got["words"]]
    assert "".join(w["word"] for w in got["words"]) == "李鹏👍在北京开会"
    assert [(e["type"], e["text"]) for e in got["entities"]] == [("PER", "李鹏"), ("LOC", "北京")]
    got = lac("😀😀李鹏😀")
    assert [(w["word"], w["pos"]) for w in got["words"]][:2] == [("😀", "w"), ("😀", "w")]
    assert [(e["type"], e["text"]) for e in got["entities"]] == [("PER", "李鹏")]
    segment = nlp.pipeline("word-segmentation", model=lac.model, tokenizer=lac.tokenizer)
    assert "👍" in [w["word"] for w in segment("李鹏👍在北京开会")]


def test_known_characters_find_a_character_the_vocabulary_has(ner):
    known = KnownCharacters(ner.tokenizer)
    assert known.any_in("😀😀李") and known.any_in("a") and known.any_in("★")
    assert not known.any_in("😀💩") and not known.any_in("") and not known.any_in("\u200b")


def test_the_sentiment_default_refuses_white_space_and_unknown_characters_only():
    """XLM-R's tokenizer makes a bare word-start mark of white space, so "   " had a token and got
    the label of an empty review; 😡 and 💩 are one <unk> to the pruned vocabulary, and got
    "positive, 0.85" both."""
    sentiment = nlp.pipeline("sentiment-analysis")
    mark = sentiment.tokenizer.convert_tokens_to_ids("\u2581")
    assert sentiment.tokenizer.contentless_ids == {mark}
    assert sentiment.tokenizer("   ", add_special_tokens=False)["input_ids"] == [mark]
    for text in ("   ", "\u3000", "\u200b "):
        with pytest.raises(DataError, match="has no tokens"):
            sentiment(text)
    for text in ("😡", "💩", "👍 👍"):
        with pytest.raises(DataError, match="holds no character the model knows"):
            sentiment(text)
    assert sentiment("垃圾😡")[0]["label"] == "negative"
