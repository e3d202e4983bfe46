"""Section 5 of issue 2: every bad input gets a defined result or a clear error."""

from __future__ import annotations

import pytest

from nlp._common import ConfigError, DataError, UnknownNameError
from nlp.tokenizer import WordPieceTokenizer, load_tokenizer, train_hybrid_tokenizer


@pytest.mark.parametrize("bad", [None, 3, 1.5, b"bytes", {"a": 1}])
def test_non_string_is_type_error(tok, bad):
    with pytest.raises(TypeError, match="text"):
        tok(bad)


def test_non_string_in_batch_names_index(tok):
    with pytest.raises(TypeError, match=r"text\[1\]"):
        tok(["好", None])


def test_lone_surrogate_is_data_error(tok):
    with pytest.raises(DataError, match=r"text\[0\].*surrogate.*character 1"):
        tok(["a\ud800b"])


def test_lone_surrogate_in_pre_split_words_names_the_word(tok):
    # a character position inside a word alone would point at the wrong place in the text
    with pytest.raises(DataError, match=r"text\[1\] holds a lone surrogate '\\udc00' at word 2 \('c\\udc00'\), "
                                        r"at character 1 of that word"):
        tok([["好"], ["a", "b", "c\udc00"]], is_split_into_words=True)


@pytest.mark.parametrize("text", ["", "   ", "\t\n\u3000", "\x00\x01\u200b"])
def test_empty_and_blank_give_only_specials(tok, text):
    enc = tok(text, return_offsets_mapping=True)
    assert enc["input_ids"] == [tok.cls_token_id, tok.sep_token_id]
    assert enc["offset_mapping"] == [(0, 0), (0, 0)]


def test_pair_with_one_empty_side(tok):
    enc = tok("好的", "", return_offsets_mapping=True)
    assert enc.tokens()[-2:] == [tok.sep_token, tok.sep_token]
    assert enc["token_type_ids"][-1] == 1


@pytest.mark.parametrize("text", ["控制\x07字符", "emoji😀👍🏽ok", "ＡＢＣ１２３", "這傢餐廳的服務", "Ⅷ①ﬁ"])
def test_odd_characters_offsets_in_bounds(tok, text):
    enc = tok(text, return_offsets_mapping=True)
    for (s, e), sid in zip(enc["offset_mapping"], enc.sequence_ids()):
        if sid is not None:
            assert 0 <= s < e <= len(text)


def test_one_megabyte_text(tok):
    text = ("这家餐厅的服务非常好，下次还来。Good food! " * 40000)[: 1 << 20]
    enc = tok(text, truncation=True, max_length=128, return_overflowing_tokens=True, stride=16,
              return_offsets_mapping=True)
    last = enc["offset_mapping"][-1]
    assert max(e for _, e in last) == len(text.rstrip())
    assert all(len(r) <= 128 for r in enc["input_ids"])


def test_bad_settings_are_config_errors(tok):
    with pytest.raises(ConfigError, match="padding"):
        tok("好", padding="sideways")
    with pytest.raises(ConfigError, match="truncation"):
        tok("好", truncation="middle")
    with pytest.raises(ConfigError, match="stride"):
        tok("好的好的", truncation=True, max_length=4, stride=3, return_overflowing_tokens=True)
    with pytest.raises(ConfigError, match="only_second"):
        tok("好", truncation="only_second", max_length=4)
    with pytest.raises(ConfigError, match="padding=True"):
        tok(["好", "好的好的"], return_tensors="pt")


def test_mismatched_pair_batch(tok):
    with pytest.raises(DataError, match="pair up"):
        tok(["a", "b"], ["c"])


def test_empty_vocab_file(tmp_path):
    (tmp_path / "vocab.txt").write_text("", encoding="utf-8")
    with pytest.raises(ConfigError, match="empty"):
        WordPieceTokenizer.from_pretrained(tmp_path)


def test_vocab_without_unk(tmp_path):
    (tmp_path / "vocab.txt").write_text("a\nb\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"\[UNK\]"):
        WordPieceTokenizer.from_pretrained(tmp_path)


def test_malformed_ernie_vocab(tmp_path):
    (tmp_path / "vocab.txt").write_text("[PAD]\t0\n[UNK]\t1\nbroken line\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="line 3"):
        WordPieceTokenizer.from_pretrained(tmp_path)
    (tmp_path / "vocab.txt").write_text("[PAD]\t0\n[UNK]\t0\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="id 0"):
        WordPieceTokenizer.from_pretrained(tmp_path)


def test_ernie_vocab_format_loads_and_saves_plain(tmp_path):
    toks = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "好", "的"]
    (tmp_path / "vocab.txt").write_text("".join(f"{t}\t{i}\n" for i, t in enumerate(toks)), encoding="utf-8")
    tok = WordPieceTokenizer.from_pretrained(tmp_path)
    assert tok("好的x")["input_ids"] == [2, 5, 6, 1, 3]
    out = tmp_path / "saved"
    tok.save_pretrained(out)
    assert (out / "vocab.txt").read_text(encoding="utf-8").split("\n")[:7] == toks


def test_missing_and_unknown_directories(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_tokenizer(tmp_path / "nope")
    with pytest.raises(ConfigError, match="neither tokenizer.json nor vocab.txt"):
        load_tokenizer(tmp_path)
    (tmp_path / "tokenizer_config.json").write_text('{"tokenizer_class": "BertTokenizr"}')
    with pytest.raises(UnknownNameError, match="Did you mean 'BertTokenizer"):
        load_tokenizer(tmp_path)
    (tmp_path / "tokenizer_config.json").write_text("{not json")
    with pytest.raises(ConfigError, match="not valid JSON"):
        load_tokenizer(tmp_path)


def test_training_bad_input(tmp_path):
    with pytest.raises(DataError, match="does not exist"):
        train_hybrid_tokenizer([tmp_path / "missing.txt"], 1000)
    empty = tmp_path / "empty.txt"
    empty.write_text("\n  \n", encoding="utf-8")
    with pytest.raises(DataError, match="no text"):
        train_hybrid_tokenizer([empty], 1000)
    small = tmp_path / "small.txt"
    small.write_text("这家餐厅的服务非常好\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="too small"):
        train_hybrid_tokenizer([small], 10)
    with pytest.raises(ConfigError, match="vocab_size"):
        train_hybrid_tokenizer([small], -5)
