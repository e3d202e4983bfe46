"""XLM-R's unigram tokenizer against transformers' XLMRobertaTokenizerFast on the same
tokenizer.json: ids, offsets, pairs, overflow windows, pre-split words; golden offsets on Chinese."""

from __future__ import annotations

import pytest
import transformers

from nlp._common import ConfigError
from nlp.tokenizer import UnigramTokenizer, build_unigram_backend, load_tokenizer

# A small unigram vocabulary in XLM-R's layout: the four fairseq specials first, <mask> last,
# pieces of one and of several Chinese characters, with and without the word-start mark.
PIECES = [("<s>", 0.0), ("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0), ("▁", -2.0), ("▁北京", -3.0),
          ("北京", -3.5), ("北", -6.0), ("京", -6.0), ("我", -5.0), ("▁我", -4.0), ("爱", -5.0),
          ("天安门", -4.0), ("天", -7.0), ("安", -7.0), ("门", -7.0), (",", -3.0), ("!", -3.0),
          ("▁a", -4.0), ("a", -5.0), ("b", -5.0), ("ab", -4.5), ("<mask>", 0.0)]
# SentencePiece's normalisation as a table: full-width punctuation, the ideographic space, a
# control character dropped
NORMALIZE = {"，": ",", "！": "!", "\u3000": " ", "\x01": ""}
TEXTS = ["我爱北京天安门！", "  我  爱\u3000ab，", "x我", "\x01北京", "北京北京天安门我", ""]


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    path = tmp_path_factory.mktemp("xlmr-tok")
    UnigramTokenizer(build_unigram_backend(PIECES, 3, NORMALIZE)).save_pretrained(path)
    return load_tokenizer(path), transformers.XLMRobertaTokenizerFast(tokenizer_file=str(path / "tokenizer.json")), path


def _offsets(rows):
    return [[tuple(o) for o in row] for row in rows]


@pytest.mark.parametrize("text", TEXTS)
def test_ids_and_offsets_equal_transformers(pair, text):
    ours, ref, _ = pair
    a, r = ours(text, return_offsets_mapping=True), ref(text, return_offsets_mapping=True)
    assert a["input_ids"] == r["input_ids"]
    assert _offsets([a["offset_mapping"]]) == _offsets([r["offset_mapping"]])


def test_pairs_windows_and_split_words_equal_transformers(pair):
    ours, ref, _ = pair
    assert ours("我爱北京", "天安门ab")["input_ids"] == ref("我爱北京", "天安门ab")["input_ids"]
    assert ours.num_special_tokens_to_add(True) == 4
    kw = dict(truncation=True, max_length=6, stride=2, return_overflowing_tokens=True, return_offsets_mapping=True)
    a, r = ours("我爱北京天安门我爱北京", **kw), ref("我爱北京天安门我爱北京", **kw)
    assert a["input_ids"] == r["input_ids"] and len(a["input_ids"]) == 3
    assert _offsets(a["offset_mapping"]) == _offsets(r["offset_mapping"])
    assert a["overflow_to_sample_mapping"] == [0, 0, 0]
    chars = list("我爱北京")
    a, r = ours(chars, is_split_into_words=True), ref(chars, is_split_into_words=True)
    assert a["input_ids"] == r["input_ids"] and a.word_ids() == r.word_ids()
    batch = ours(["我爱北京", "天安门"], padding=True)
    assert batch["input_ids"][1][-1] == ours.pad_token_id == 1


def test_golden_chinese_offsets(pair):
    """A piece of several characters covers all of them; the word-start mark covers none."""
    ours, _, _ = pair
    enc = ours("我爱北京天安门！", return_offsets_mapping=True)
    assert enc.tokens() == ["<s>", "▁我", "爱", "北京", "天安门", "!", "</s>"]
    assert enc["offset_mapping"] == [(0, 0), (0, 1), (1, 2), (2, 4), (4, 7), (7, 8), (0, 0)]
    assert enc.char_to_token(5) == 4 and enc.char_to_token(3) == 3
    assert [ours.cls_token, ours.sep_token, ours.pad_token, ours.unk_token, ours.mask_token] == \
        ["<s>", "</s>", "<pad>", "<unk>", "<mask>"]
    assert ours.mask_token_id == len(PIECES) - 1 and ours.vocab_size == len(PIECES)


def test_saved_dir_loads_in_transformers_autotokenizer(pair):
    ours, _, path = pair
    auto = transformers.AutoTokenizer.from_pretrained(path)
    assert auto("北京天安门")["input_ids"] == ours("北京天安门")["input_ids"]
    assert isinstance(ours, UnigramTokenizer) and ours.pieces() == PIECES


def test_bad_vocabularies_say_what_is_wrong(tmp_path):
    with pytest.raises(ConfigError, match="appears twice"):
        build_unigram_backend(PIECES + [("北京", -1.0)], 3)
    with pytest.raises(ConfigError, match="unk_id=99"):
        build_unigram_backend(PIECES, 99)
    with pytest.raises(ConfigError, match="no tokenizer.json"):
        UnigramTokenizer.from_pretrained(tmp_path)


def test_unspaced_words_get_no_word_start_marks(pair):
    """Characters of running Chinese text fed one word each (the character-labelled tasks) become
    each character's own piece, as mid-text, instead of transformers' "▁" + character per word."""
    ours, ref, _ = pair
    chars = list("我爱北京")
    marked = ours(chars, is_split_into_words=True)
    assert ours.convert_ids_to_tokens(marked["input_ids"]) == ["<s>", "▁我", "▁", "爱", "▁", "北", "▁", "京", "</s>"]
    plain = ours(chars, is_split_into_words=True, unspaced_words=True)
    assert ours.convert_ids_to_tokens(plain["input_ids"]) == ["<s>", "我", "爱", "北", "京", "</s>"]
    assert plain.word_ids() == [None, 0, 1, 2, 3, None]
    # truncation, overflow windows and padding are the main backend's, call by call
    kw = dict(is_split_into_words=True, unspaced_words=True, truncation=True, max_length=4, stride=1,
              return_overflowing_tokens=True)
    assert [ours.convert_ids_to_tokens(r) for r in ours([chars], **kw)["input_ids"]] == [
        ["<s>", "我", "爱", "</s>"], ["<s>", "爱", "北", "</s>"], ["<s>", "北", "京", "</s>"]]
    padded = ours([chars, ["我"]], is_split_into_words=True, unspaced_words=True, padding=True)
    assert padded["input_ids"][1] == [0, 9, 2, 1, 1, 1]
    # the marked path is untouched afterwards (transformers' rule for pre-split words)
    assert ours(chars, is_split_into_words=True)["input_ids"] == ref(chars, is_split_into_words=True)["input_ids"]
    with pytest.raises(ConfigError, match="is_split_into_words=True"):
        ours("我爱北京", unspaced_words=True)


def test_character_tasks_feed_one_piece_per_character(pair):
    """NER rows of a character-labelled sentence: one token per character, its label on it; a
    word-segmented sentence keeps transformers' marks."""
    from nlp.tasks.ner.preprocess import preprocess_ner

    ours, _, _ = pair
    out = preprocess_ner({"tokens": [list("我爱北京"), ["我", "爱", "北京"]],
                          "ner_tags": [["O", "O", "B-LOC", "I-LOC"], ["O", "O", "B-LOC"]]},
                         ours, label_names=["O", "B-LOC", "I-LOC"], max_length=16)
    assert ours.convert_ids_to_tokens(out["input_ids"][0]) == ["<s>", "我", "爱", "北", "京", "</s>"]
    assert out["labels"][0] == [-100, 0, 0, 1, 2, -100]
    assert ours.convert_ids_to_tokens(out["input_ids"][1]) == ["<s>", "▁我", "▁", "爱", "▁北京", "</s>"]
    assert out["labels"][1] == [-100, 0, 0, -100, 1, -100]
