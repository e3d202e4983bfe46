"""WordPiece == transformers' BertTokenizerFast, on whole corpora and on every option."""

from __future__ import annotations

import pytest
from transformers import AutoTokenizer, BertTokenizerFast

from nlp.tokenizer import WordPieceTokenizer, load_tokenizer


@pytest.fixture(scope="module")
def pair(parity_dir):
    return WordPieceTokenizer.from_pretrained(parity_dir), BertTokenizerFast.from_pretrained(parity_dir)


@pytest.mark.parametrize("corpus", ["reviews", "peoples_daily"])
def test_whole_corpus_ids_and_offsets(pair, corpus, request):
    texts = request.getfixturevalue(corpus)
    mine, ref = pair
    a = mine(texts, return_offsets_mapping=True)
    b = ref(texts, return_offsets_mapping=True)
    assert a["input_ids"] == b["input_ids"]
    assert a["offset_mapping"] == b["offset_mapping"]
    assert a["token_type_ids"] == b["token_type_ids"]
    unk = mine.unk_token_id
    assert any(unk in ids for ids in a["input_ids"]), "the vocab must leave gaps that give [UNK]"


TEXTS = ["我爱北京天安门，HELLO world！", "这家餐厅 的服务非常好 123", "", "   ", "Ｈｅｌｌｏ ｗｏｒｌｄ。\t好\x00的",
         "Café naïve 東京", "[MASK] 好 [SEP] 的", "😀 很好"]
PAIRS = ["服务", "", "一般般吧", "好的好的好的好的好的好的", "x", "还行", "不错", "差评"]
OPTIONS = [
    {},
    {"return_offsets_mapping": True, "return_special_tokens_mask": True, "return_length": True},
    {"truncation": True, "max_length": 8},
    {"truncation": "longest_first", "max_length": 9, "stride": 2, "return_overflowing_tokens": True,
     "return_offsets_mapping": True, "padding": True},
    {"truncation": "only_first", "max_length": 20, "stride": 1, "return_overflowing_tokens": True},
    {"padding": "max_length", "max_length": 20, "truncation": True},
    {"padding": True, "pad_to_multiple_of": 8},
    {"add_special_tokens": False, "return_offsets_mapping": True},
]


@pytest.mark.parametrize("kwargs", OPTIONS, ids=[str(i) for i in range(len(OPTIONS))])
@pytest.mark.parametrize("with_pair", [False, True])
def test_options_match_transformers(pair, kwargs, with_pair):
    mine, ref = pair
    args = (TEXTS, PAIRS) if with_pair else (TEXTS,)
    a, b = mine(*args, **kwargs), ref(*args, **kwargs)
    assert dict(a) == dict(b)
    for i in range(len(a["input_ids"])):
        assert a.word_ids(i) == b.word_ids(i)
        assert a.sequence_ids(i) == b.sequence_ids(i)
        assert a.tokens(i) == b.tokens(i)


def test_only_second_truncation_with_overflow(pair):
    mine, ref = pair
    first, second = ["短句"], ["这家餐厅的服务非常好，下次还来这家餐厅吃饭"]
    kw = dict(truncation="only_second", max_length=10, stride=2, return_overflowing_tokens=True,
              return_offsets_mapping=True, padding="max_length")
    a, b = mine(first, second, **kw), ref(first, second, **kw)
    assert dict(a) == dict(b)
    assert len(a["input_ids"]) > 1 and a["overflow_to_sample_mapping"] == [0] * len(a["input_ids"])


def test_single_string_unbatched_and_char_to_token(pair):
    mine, ref = pair
    text = "我爱北京 hello"
    a, b = mine(text), ref(text)
    assert dict(a) == dict(b) and isinstance(a["input_ids"][0], int)
    for c in range(len(text)):
        assert a.char_to_token(c) == b.char_to_token(c)
    assert a.word_ids() == b.word_ids()


def test_split_into_words(pair):
    mine, ref = pair
    words = [["我", "爱", "北京"], ["hello", "world"]]
    kw = dict(is_split_into_words=True, return_offsets_mapping=True, padding=True)
    a, b = mine(words, **kw), ref(words, **kw)
    assert dict(a) == dict(b)
    assert a.word_ids(1) == b.word_ids(1)


def test_tensors(pair):
    import torch

    mine, ref = pair
    a = mine(TEXTS, padding=True, return_tensors="pt")
    b = ref(TEXTS, padding=True, return_tensors="pt")
    for k in b:
        assert torch.equal(a[k], b[k])


def test_save_loads_in_transformers_identically(pair, tmp_path, reviews):
    mine, ref = pair
    mine.save_pretrained(tmp_path)
    for name in ("tokenizer.json", "vocab.txt", "tokenizer_config.json", "special_tokens_map.json"):
        assert (tmp_path / name).is_file()
    theirs = AutoTokenizer.from_pretrained(tmp_path)
    sample = reviews[:500] + TEXTS
    assert dict(theirs(sample, return_offsets_mapping=True)) == dict(ref(sample, return_offsets_mapping=True))
    again = load_tokenizer(tmp_path)
    assert isinstance(again, WordPieceTokenizer)
    assert dict(again(sample, return_offsets_mapping=True)) == dict(mine(sample, return_offsets_mapping=True))
