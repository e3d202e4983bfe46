"""`widen_ascii` (nlp/tokenizer/wordpiece.py): a WordPiece tokenizer for a model trained on text
that writes ASCII full-width reads "2024年" as "２０２４年", one character for one, everywhere
(texts, pre-split words, pairs), and keeps the setting through save and load."""

from __future__ import annotations

import json

import pytest

from nlp._common import ConfigError
from nlp.tokenizer import load_tokenizer
from nlp.tokenizer.wordpiece import WordPieceTokenizer

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "年", "增", "长", "２", "０", "４", "３", "．", "５", "％",
         "ｇ", "ｄ", "ｐ", "2", "0", "4"]


def tokenizer(**kw):
    return WordPieceTokenizer({t: i for i, t in enumerate(VOCAB)}, **kw)


def test_ascii_reads_as_its_full_width_form_with_the_text_s_offsets():
    wide, plain = tokenizer(widen_ascii=True), tokenizer()
    text = "2024年增长3.5%GDP"
    enc = wide(text, return_offsets_mapping=True)
    assert enc["input_ids"] == wide("２０２４年增长３．５％ＧＤＰ")["input_ids"]
    # "２０２４" and "ｇｄｐ" are words this toy vocabulary lacks; 3.5% is pieces it has
    assert wide.convert_ids_to_tokens(enc["input_ids"]) == ["[CLS]", "[UNK]", "年", "增", "长", "３", "．", "５", "％",
                                                            "[UNK]", "[SEP]"]
    assert plain.convert_ids_to_tokens(plain(text)["input_ids"])[5:9] == ["[UNK]"] * 4
    assert [text[a:b] for a, b in enc["offset_mapping"][1:-1]] == ["2024", "年", "增", "长", "3", ".", "5", "%", "GDP"]
    # one character a word, as the character-level pipelines feed it
    split = wide([list("2024年")], is_split_into_words=True, add_special_tokens=False)["input_ids"][0]
    assert split == [8, 9, 8, 10, 5]
    assert plain([list("2024年")], is_split_into_words=True, add_special_tokens=False)["input_ids"][0] == [18, 19, 18, 20, 5]
    pair = wide("2024年", "3.5%")["input_ids"]
    assert pair == wide("２０２４年", "３．５％")["input_ids"]
    assert wide.input_fold is not None and plain.input_fold is None


def test_the_setting_is_saved_and_read_back(tmp_path):
    tokenizer(widen_ascii=True).save_pretrained(tmp_path / "wide")
    config = json.loads((tmp_path / "wide" / "tokenizer_config.json").read_text(encoding="utf-8"))
    assert config["widen_ascii"] is True
    assert load_tokenizer(tmp_path / "wide").widen_ascii is True
    tokenizer().save_pretrained(tmp_path / "plain")
    assert "widen_ascii" not in json.loads((tmp_path / "plain" / "tokenizer_config.json").read_text(encoding="utf-8"))
    assert load_tokenizer(tmp_path / "plain").widen_ascii is False


def test_a_setting_that_is_not_a_boolean_is_refused_naming_the_file(tmp_path):
    tokenizer().save_pretrained(tmp_path)
    path = tmp_path / "tokenizer_config.json"
    path.write_text(json.dumps({**json.loads(path.read_text(encoding="utf-8")), "widen_ascii": "yes"}), encoding="utf-8")
    with pytest.raises(ConfigError, match=r"widen_ascii in .*tokenizer_config.json must be true or false, got 'yes'"):
        load_tokenizer(tmp_path)
    with pytest.raises(ConfigError, match="widen_ascii must be true or false"):
        tokenizer(widen_ascii=1)
