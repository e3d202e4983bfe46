"""TinyBERT-style word replacement for distillation (nlp/train/augment.py): the dictionary rule,
the masked-LM rule, determinism, and what is refused."""

from __future__ import annotations

from pathlib import Path

import datasets
import pytest

import nlp
from nlp._common import ConfigError
from nlp.recipes import recipe_path
from nlp.tokenizer import JiebaSegmenter
from nlp.train.augment import AugmentStats, JiebaDictionary, MaskedLMChars, WordReplacer, augment_examples
from nlp.train.recipe import load_recipe

ASSET = Path(nlp.__file__).parent / "assets" / "ernie-tiny-zh"
TEXTS = ["这家餐厅的服务非常好，下次还会再来！", "质量太差了，用了2天就坏了，iPhone充电器也不行。", "好"]


@pytest.fixture(scope="module")
def dictionary() -> JiebaDictionary:
    return JiebaDictionary()


def test_candidates_share_the_tag_and_length_and_are_nearest_in_frequency():
    d = JiebaDictionary(["好 900 a", "大 800 a", "小 700 a", "新 600 a", "老 500 a", "很好 100 a", "跑 850 v",
                         "ABC 5 eng"])
    assert d.candidates("小", 2) == ["大", "新"]  # ranks 1 and 3 around rank 2; not 跑 (v) nor 很好 (2 characters)
    assert d.candidates("好", 3) == ["大", "小", "新"]
    assert d.candidates("很好", 3) == []  # alone in its bucket
    assert d.candidates("跳", 3) == [] and "ABC" not in d.where  # outside the dictionary; not CJK


def test_the_jieba_dictionary_rule(dictionary):
    for word in ("服务", "非常", "餐厅", "好"):
        key, _ = dictionary.where[word]
        options = dictionary.candidates(word, 15)
        assert len(options) == 15 and word not in options
        assert all(dictionary.where[o][0] == key and len(o) == len(word) for o in options), (word, options)


def test_rewriting_is_deterministic_keeps_lengths_and_non_cjk_text(dictionary):
    r = WordReplacer(p=0.5, candidates=15, seed=7, dictionary=dictionary)
    keys = [(i, 0, 0) for i in range(len(TEXTS))]
    stats = AugmentStats()
    first = r.rewrite(TEXTS, keys, stats)
    assert first == WordReplacer(p=0.5, candidates=15, seed=7, dictionary=dictionary).rewrite(TEXTS, keys)
    assert first != WordReplacer(p=0.5, candidates=15, seed=8, dictionary=dictionary).rewrite(TEXTS, keys)
    assert first[1] == r.rewrite(TEXTS[1:2], keys[1:2])[0]  # a copy depends on its key, not its batch mates
    assert first[:2] != TEXTS[:2] and 0 < stats.replaced < stats.words
    for old, new in zip(TEXTS, first):
        assert len(new) == len(old)
        assert [c for c in new if not "\u4e00" <= c <= "\u9fff"] == [c for c in old if not "\u4e00" <= c <= "\u9fff"]
    assert "iPhone" in first[1] and first[1].index("2") == TEXTS[1].index("2")
    everything = WordReplacer(p=1.0, candidates=15, seed=7, dictionary=dictionary).rewrite(["服务非常好"], [(0, 0, 0)])
    assert all(a != b for a, b in zip(everything[0], "服务非常好"))  # every word replaced, none by itself


def test_single_characters_from_a_masked_lm(dictionary):
    mlm = MaskedLMChars(str(ASSET), max_length=64)
    (options,) = mlm.predict(["这家餐厅的服务非常好"], [[9]], k=5)  # 好, masked
    assert len(options[0]) == 5 and "好" not in options[0]
    assert all(len(c) == 1 and "\u4e00" <= c <= "\u9fff" for c in options[0])
    r = WordReplacer(p=1.0, candidates=5, seed=3, dictionary=dictionary, mlm=mlm)
    text = "这家的菜好吃又便宜"
    words = JiebaSegmenter(hmm=False).cut(text)
    singles = [i for i, w in enumerate(words) if len(w) == 1]
    assert singles, words
    stats = AugmentStats()
    (new,) = r.rewrite([text], [(0, 0, 0)], stats)
    assert stats.by_mlm == len(singles) and len(new) == len(text)
    starts = [sum(map(len, words[:i])) for i in singles]
    assert all(new[c] != text[c] for c in starts)  # each single-character word replaced by another character
    assert new == WordReplacer(p=1.0, candidates=5, seed=3, dictionary=dictionary, mlm=mlm).rewrite(
        [text], [(0, 0, 0)])[0]


def test_augment_examples_keeps_labels_and_order(dictionary):
    ds = datasets.Dataset.from_dict({"text": TEXTS[:2], "label": [1, 0]},
                                    features=datasets.Features({"text": datasets.Value("string"),
                                                                "label": datasets.ClassLabel(names=["neg", "pos"])}))
    r = WordReplacer(p=0.5, candidates=15, seed=1, dictionary=dictionary)
    out, stats = augment_examples(ds, ("text", "text_pair"), 3, r)
    assert len(out) == 6 and stats.copies == 6 and out.features == ds.features
    assert out["label"] == [1, 1, 1, 0, 0, 0]
    assert len(set(out["text"][:3])) == 3  # three different copies of example 0
    assert out["text"][3] == r.rewrite([TEXTS[1]], [(1, 0, 0)])[0]


def _recipe(*extra: str):
    return load_recipe(recipe_path("sentiment-reviews"), ["model.name=" + str(ASSET), "distill.teacher=" + str(ASSET),
                                                          *extra])


def test_augment_settings_are_checked_every_problem_at_once(tmp_path):
    with pytest.raises(ConfigError) as err:
        _recipe("distill.augment.copies=0", "distill.augment.p=1.5", "distill.augment.candidatez=3",
                "distill.augment.mlm=/nonexistent", "distill.layer_pairs=unifrom", "distill.relations=[query, kee]",
                "distill.relation_heads=0")
    text = str(err.value)
    for part in ("copies must be >= 1, got 0", "p must lie in (0, 1], got 1.5",
                 "distill.augment.candidatez: unknown key. Did you mean 'candidates'?",
                 "distill.augment.mlm '/nonexistent' is not a directory",
                 "layer_pairs: 'unifrom' is not a rule (last, uniform) nor a list of [student, teacher] pairs. "
                 "Did you mean 'uniform'?",
                 "Did you mean 'key'?", "relation_heads must be >= 1"):
        assert part in text, text
    with pytest.raises(ConfigError, match="layer_pairs must be last, uniform or a non-empty list"):
        _recipe("distill.layer_pairs=[[0, 1, 2]]")
    with pytest.raises(ConfigError, match="the rewritten copies learn from the teacher alone"):
        _recipe("distill.augment.copies=1", "distill.soft_weight=0")


def test_augmentation_is_refused_where_labels_point_into_the_text():
    with pytest.raises(ConfigError, match="distill.augment: token-classification examples are not rewritten: word "
                                          "replacement applies to sentence-level tasks"):
        load_recipe(recipe_path("ner-peoples-daily"), ["model.name=" + str(ASSET), "distill.teacher=" + str(ASSET),
                                                       "distill.augment.copies=2"])
