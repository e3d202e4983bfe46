"""Carrying MSRA's entity conventions onto People's Daily: the lexicon of consistently labelled
strings, whole-word matching, spans never cut, and the zh-ner-msra dataset built with it."""

import pytest

from nlp.tasks.datasets.builtin import load_builtin
from nlp.tasks.datasets.ner_conventions import (_occurrences, align_units, convention_lexicon, holding_words,
                                                labelled_stretches, word_runs)
from nlp.tasks.ner.tags import get_entities


def _row(pairs):
    """('中美', 'B-LOC B-LOC'), ('会谈', 'O O') ... -> (characters, tags)."""
    chars = [c for text, _ in pairs for c in text]
    tags = [t for _, tagged in pairs for t in tagged.split()]
    assert len(chars) == len(tags)
    return chars, tags


ROWS = [
    _row([("中美", "B-LOC B-LOC"), ("会谈", "O O")]),
    _row([("中美", "B-LOC B-LOC"), ("关系", "O O")]),
    _row([("中美", "B-LOC B-LOC"), ("合作", "O O")]),
    _row([("中美洲", "B-LOC I-LOC I-LOC"), ("国家", "O O")]),  # inside a larger name: counts against
    _row([("北约", "B-ORG I-ORG"), ("东扩", "O O")]),
    _row([("北约", "B-ORG I-ORG"), ("会议", "O O")]),
    _row([("北约", "B-ORG I-ORG")]),
    _row([("会议", "O O"), ("中", "B-LOC")]),  # 中 alone: once a country, three times not
    _row([("会议", "O O"), ("中", "O")]),
    _row([("工作", "O O"), ("中", "O")]),
    _row([("生活", "O O"), ("中", "O")]),
]


def test_lexicon_keeps_only_what_is_labelled_the_same_at_most_occurrences():
    stretches = labelled_stretches(ROWS)
    assert stretches == {"中美", "中美洲", "北约", "中"}
    lexicon = convention_lexicon(ROWS, stretches)
    assert lexicon["中美"] == ("B-LOC", "B-LOC")  # 3 of its 4 occurrences (one inside 中美洲)
    assert lexicon["北约"] == ("B-ORG", "I-ORG")
    assert "中" not in lexicon  # LOC at 4 of its 8 occurrences (3 of them in 中美): under the share
    assert "中美洲" not in lexicon  # once: under the count
    assert convention_lexicon(ROWS, stretches, min_share=0.8).keys() == {"北约"}  # 中美: 3 of 4
    assert convention_lexicon(ROWS, stretches, min_count=4) == {}


def test_whole_words_are_relabelled_longest_first_and_no_span_is_cut():
    lexicon = {"中美": ("B-LOC", "B-LOC"), "中国共产党": ("B-ORG",) + ("I-ORG",) * 4, "中": ("B-LOC",),
               "北京": ("B-LOC", "I-LOC")}
    words = ["中美", "会谈", "在", "会议", "中"]
    new, changed = align_units(words, ["O"] * 8, lexicon)
    assert new == ["B-LOC", "B-LOC", "O", "O", "O", "O", "O", "B-LOC"]
    assert changed == ["中美", "中"]  # the lexicon decides; only whole words are looked up
    assert align_units(["会", "议中"], ["O"] * 3, lexicon)[1] == []  # 中 inside a word: never
    # PKU's 中国/ns 共产党/n: the run of two words is relabelled whole, as MSRA labels it
    new, changed = align_units(["中国", "共产党", "成立"], ["B-LOC", "I-LOC", "O", "O", "O", "O", "O"], lexicon)
    assert new == ["B-ORG", "I-ORG", "I-ORG", "I-ORG", "I-ORG", "O", "O"] and changed == ["中国共产党"]
    # 北京 inside the sentence's own ORG 北京大学 (one PKU word here split in two): left alone
    tags = ["B-ORG", "I-ORG", "I-ORG", "I-ORG"]
    assert align_units(["北京", "大学"], tags, lexicon) == (tags, [])
    # already as the lexicon says: kept, not counted
    assert align_units(["北京"], ["B-LOC", "I-LOC"], lexicon) == (["B-LOC", "I-LOC"], [])


def test_word_runs_are_the_candidates_a_sentence_offers():
    assert word_runs(["中国", "共产党", "成立"], {"中国", "中国共产党", "共产党成立", "国共"}) == {
        "中国", "中国共产党", "共产党成立"}  # never a string across a word's inside (国共)


def test_holding_words_are_the_words_a_labelled_stretch_is_part_of():
    within = {"邓小平", "华", "中美"}
    words = ["邓小平理论", "访华", "中美", "华", "会议", "邓小", "一二三四五六七八九十十一十二十三十四华"]
    # 中美 and 华 are stretches themselves (word_runs offers them); 邓小 holds no whole stretch;
    # a word over MAX_CHARS (14) characters is never a candidate
    assert holding_words(words, within) == {"邓小平理论", "访华"}


def test_a_name_inside_a_word_is_relabelled_with_the_word_whole():
    rows = [_row([("邓小平理论", "B-PER I-PER I-PER O O"), ("学习", "O O")]) for _ in range(3)] + [
        _row([("访华", "O B-LOC")]), _row([("访华", "O B-LOC")]), _row([("访华", "O B-LOC")]),
        _row([("访华", "O O")]), _row([("访华", "O O")])]  # 3 of 5: exactly the share
    lexicon = convention_lexicon(rows, holding_words(["邓小平理论", "访华"], labelled_stretches(rows)))
    assert lexicon == {"邓小平理论": ("B-PER", "I-PER", "I-PER", "O", "O"), "访华": ("O", "B-LOC")}
    new, changed = align_units(["学习", "邓小平理论", "代表团", "访华"], ["O"] * 12, lexicon)
    assert new == ["O", "O", "B-PER", "I-PER", "I-PER", "O", "O", "O", "O", "O", "O", "B-LOC"]
    assert changed == ["邓小平理论", "访华"]


def test_occurrences_finds_every_start_as_a_scan_does():
    text = "中美会谈\n中美洲\n美美美\n中\n"
    found = _occurrences(text, {"中美", "美美", "中", "美", "洲\n", "日本", ""})
    assert found == {"中美": [0, 5], "美美": [9, 10], "中": [0, 5, 13], "美": [1, 6, 9, 10, 11],
                     "洲\n": [7]}  # overlapping starts counted; absent and empty strings left out


@pytest.fixture(scope="module")
def built(datasets_cache):
    return load_builtin("zh-ner-msra", datasets_cache), load_builtin("zh-ner", datasets_cache)[0]


def test_zh_ner_msra_is_zh_ner_with_peoples_daily_relabelled(built):
    (dsd, stats), plain = built
    names = dsd["train"].features["ner_tags"].feature.names
    assert names == plain["train"].features["ner_tags"].feature.names
    for split in ("train", "dev", "test"):
        assert dsd[split]["id"] == plain[split]["id"] and dsd[split]["tokens"] == plain[split]["tokens"]
        differ = [i for i, (a, b) in enumerate(zip(dsd[split]["ner_tags"], plain[split]["ner_tags"])) if a != b]
        assert differ and all(dsd[split]["id"][i].startswith("pd98-") for i in differ)  # MSRA rows as they are
    relabelled = stats["relabelled (pd98)"]
    assert relabelled["lexicon strings"] > 1000 and relabelled["test"] > 300 and relabelled["train"] > 3000
    # a PKU abbreviation and a PKU-split organisation name, as MSRA labels them
    ents = {}
    for toks, tags in zip(dsd["test"]["tokens"], dsd["test"]["ner_tags"]):
        for kind, start, end in get_entities([names[t] for t in tags]):
            ents.setdefault("".join(toks[start:end + 1]), set()).add(kind)
    assert ents["十五大"] == {"ORG"} and ents["中共中央政治局"] == {"ORG"}
    assert "美" in ents and ents["美"] == {"LOC"}  # 中美 and the like: each country its own LOC
    # names inside a PKU word, as MSRA labels them: the 邓小平 of 邓小平理论, the 华 of 访华
    for word, tagging in (("邓小平理论", ["B-PER", "I-PER", "I-PER", "O", "O"]), ("访华", ["O", "B-LOC"])):
        seen = 0
        for rid, toks, tags in zip(dsd["test"]["id"], dsd["test"]["tokens"], dsd["test"]["ner_tags"]):
            text = "".join(toks)
            if rid.startswith("pd98-") and word in text:
                at = text.index(word)
                assert [names[t] for t in tags[at:at + len(word)]] == tagging, text
                seen += 1
        assert seen >= 3, word
    assert relabelled["lexicon strings"] > 1400
