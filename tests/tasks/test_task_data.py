"""Readers on tiny fixture files in the exact public formats; bad input names file and line."""

import json

import pytest

from nlp._common import DataError
from nlp.tasks import datasets as nds
from nlp.tasks.classification.data import read_classification
from nlp.tasks.ner.data import read_conll, read_paddle_ner
from nlp.tasks.qa.data import read_squad


def _write(path, text):
    path.write_text(text, encoding="utf-8")
    return path


def test_chnsenticorp_tsv_via_the_public_table(tmp_path):
    train = _write(tmp_path / "train.tsv", "label\ttext_a\n1\t房间很干净，服务\"热情\"\n0\t太吵了\n")
    dev = _write(tmp_path / "dev.tsv", "qid\tlabel\ttext_a\n0\t1\t不错\n")
    dsd = nds.load("ChnSentiCorp", data_files={"train": str(train), "dev": str(dev)})
    assert dsd["train"]["text"] == ["房间很干净，服务\"热情\"", "太吵了"]
    assert dsd["train"]["label"] == [1, 0] and dsd["dev"]["label"] == [1]
    assert dsd["train"].features["label"].names == ["0", "1"]


def test_clue_jsonl_tnews_ocnli_afqmc(tmp_path):
    tnews = _write(tmp_path / "tnews.json", "\n".join(json.dumps(r, ensure_ascii=False) for r in [
        {"label": "102", "label_desc": "news_entertainment", "sentence": "江疏影甜甜圈自拍", "keywords": ""},
        {"label": "110", "label_desc": "news_military", "sentence": "以色列大规模空袭", "keywords": ""},
    ]) + "\n")
    ds = nds.load("tnews", "dev", data_files={"dev": str(tnews)})
    names = ds.features["label"].names
    assert [names[i] for i in ds["label"]] == ["102", "110"] and len(names) == 15
    ocnli = _write(tmp_path / "ocnli.json", "\n".join(json.dumps(r, ensure_ascii=False) for r in [
        {"sentence1": "他去了", "sentence2": "他没去", "label": "contradiction", "id": 0},
        {"sentence1": "甲", "sentence2": "乙", "label": "-", "id": 1},
    ]))
    ds, stats = read_classification(ocnli, text_column="sentence1", text_pair_column="sentence2",
                                    label_names=["entailment", "contradiction", "neutral"],
                                    ignore_labels=["-"], return_stats=True)
    assert ds["text_pair"] == ["他没去"] and ds["label"] == [1]
    assert stats.skipped == {"records labelled '-'": 1}
    test = _write(tmp_path / "afqmc_test.json", '{"id": 0, "sentence1": "花呗", "sentence2": "借呗"}\n')
    assert "label" not in nds.load("afqmc", "test", data_files={"test": str(test)}).column_names


def test_csv_multilabel_regression_and_lcqmc(tmp_path):
    csv = _write(tmp_path / "a.csv", 'text,label\n"好，很好",pos\n差,neg\n')
    assert read_classification(csv)["label"] == [1, 0]  # inferred sorted names
    ml = _write(tmp_path / "m.jsonl", '{"text": "a", "label": ["x", "y"]}\n{"text": "b", "label": []}\n')
    ds = read_classification(ml, problem_type="multi_label_classification", label_names=["x", "y", "z"])
    assert ds["label"] == [[0, 1], []]
    reg = _write(tmp_path / "r.jsonl", '{"text": "a", "label": 0.5}\n')
    assert read_classification(reg, problem_type="regression")["label"] == [0.5]
    lcqmc = _write(tmp_path / "lcqmc.tsv", "喜欢打篮球的男生喜欢什么样的女生\t爱打篮球的男生喜欢什么样的女生\t1\n")
    ds = nds.load("lcqmc", "train", data_files={"train": str(lcqmc)})
    assert ds[0]["text_pair"].startswith("爱打篮球") and ds[0]["label"] == 1


def test_classification_errors_name_file_and_line(tmp_path):
    bad = _write(tmp_path / "bad.jsonl", '{"text": "a", "label": "pos"}\n{"text": "b", "label": "meh"}\n')
    with pytest.raises(DataError, match=r"bad.jsonl:2: label 'meh' is not in the label set"):
        read_classification(bad, label_names=["neg", "pos"])
    empty = _write(tmp_path / "empty.jsonl", '{"text": "a", "label": 1}\n{"text": "  ", "label": 0}\n')
    with pytest.raises(DataError, match=r"empty.jsonl:2: empty text"):
        read_classification(empty)
    ds, stats = read_classification(empty, skip_empty=True, return_stats=True)
    assert len(ds) == 1 and stats.skipped == {"empty texts": 1}
    broken = _write(tmp_path / "broken.jsonl", '{"text": "a", "label": 1}\n{"text": "b", \n')
    with pytest.raises(DataError, match=r"broken.jsonl:2: malformed JSON"):
        read_classification(broken)
    dup = _write(tmp_path / "dup.jsonl", '{"text": "a", "label": 1}\n{"text": "a", "label": 1}\n')
    ds, stats = read_classification(dup, deduplicate=True, return_stats=True)
    assert len(ds) == 1 and stats.skipped == {"duplicates": 1}


def test_conll_bio_bioes_and_repair(tmp_path):
    path = _write(tmp_path / "ner.txt", "-DOCSTART- O\n\n北 B-LOC\n京 E-LOC\n好 O\n\n江 S-PER\n")
    ds = read_conll(path)  # E-/S- tags: BIOES detected
    names = ds.features["ner_tags"].feature.names
    assert [[names[i] for i in r] for r in ds["ner_tags"]] == [["B-LOC", "E-LOC", "O"], ["S-PER"]]
    ds = read_conll(path, to_scheme="BIO")
    names = ds.features["ner_tags"].feature.names
    assert [names[i] for i in ds[0]["ner_tags"]] == ["B-LOC", "I-LOC", "O"]
    bad = _write(tmp_path / "bad.txt", "北\tB-LOC\n京\tI-LOC\n\n在\tO\n京\tI-LOC\n")
    with pytest.raises(DataError, match=r"bad.txt:4: invalid BIO tags: position 1"):
        read_conll(bad)
    ds, stats = read_conll(bad, on_invalid="repair", return_stats=True)
    names = ds.features["ner_tags"].feature.names
    assert [names[i] for i in ds[1]["ner_tags"]] == ["O", "B-LOC"]
    assert stats.repaired == {"sentences with invalid BIO tags": 1}
    mismatch = _write(tmp_path / "m.txt", "北\tB-LOC\n京\n")
    with pytest.raises(DataError, match=r"m.txt:2: expected 'token<TAB>tag'"):
        read_conll(mismatch)


def test_msra_paddle_tsv_and_count_mismatch(tmp_path):
    line = "\x02".join("我爱北京") + "\t" + "\x02".join(["O", "O", "B-LOC", "I-LOC"])
    path = _write(tmp_path / "train.tsv", "text_a\tlabel\n" + line + "\n")
    ds = nds.load("msra-ner", "train", data_files={"train": str(path)})
    assert ds[0]["tokens"] == list("我爱北京")
    assert ds.features["ner_tags"].feature.names[ds[0]["ner_tags"][2]] == "B-LOC"
    bad = _write(tmp_path / "bad.tsv", "text_a\tlabel\n" + "\x02".join("北京") + "\tB-LOC\n")
    with pytest.raises(DataError, match=r"bad.tsv:2: 2 tokens but 1 tags"):
        read_paddle_ner(bad)


def _squad(path, answer_start, impossible=False):
    qa = {"id": "TRAIN_1_QUERY_0", "question": "首都是哪里？",
          "answers": [{"text": "北京", "answer_start": answer_start}]}
    if impossible:
        qa = {"id": "q2", "question": "哪年？", "answers": [], "is_impossible": True}
    path.write_text(json.dumps({"version": "v1.0", "data": [{"id": "D1", "title": "中国", "paragraphs": [
        {"id": "P1", "context": " 中国的首都是北京，北京很大。", "qas": [qa]}]}]}, ensure_ascii=False), encoding="utf-8")
    return path


def test_cmrc_squad_json(tmp_path):
    ds = nds.load("cmrc2018", "dev", data_files={"dev": str(_squad(tmp_path / "dev.json", 7))})
    row = ds[0]
    assert row["context"][row["answers"]["answer_start"][0]:][:2] == "北京"  # context not stripped
    ds = read_squad(_squad(tmp_path / "imp.json", 0, impossible=True))
    assert ds[0]["is_impossible"] and ds[0]["answers"]["text"] == []


def test_squad_bad_answer_names_the_record(tmp_path):
    path = _squad(tmp_path / "bad.json", 3)
    with pytest.raises(DataError, match=r"question id 'TRAIN_1_QUERY_0': answer '北京' not found at answer_start=3"):
        read_squad(path)
    ds, stats = read_squad(path, on_bad_answer="relocate", return_stats=True)
    assert ds[0]["answers"]["answer_start"] == [7] and sum(stats.repaired.values()) == 1
    ds, stats = read_squad(path, on_bad_answer="skip", return_stats=True)
    assert len(ds) == 0 and sum(stats.skipped.values()) == 1


def test_negative_answer_start_is_refused_with_the_question_id(tmp_path):
    # context[-5:-3] is "北京": Python's negative slicing used to accept it, and the question
    # silently became a no-answer example in preprocessing
    path = _squad(tmp_path / "neg.json", -5)
    for on_bad in ("error", "relocate", "skip"):
        with pytest.raises(DataError, match=r"neg.json: question id 'TRAIN_1_QUERY_0': answer_start=-5 is negative"):
            read_squad(path, on_bad_answer=on_bad)


def test_training_file_without_the_label_column_is_refused(tmp_path):
    path = _write(tmp_path / "reviews.csv", "text,sentiment\n很好,pos\n很差,neg\n")
    assert read_classification(path).column_names == ["text"]  # a test file may be unlabelled
    with pytest.raises(DataError, match=r"reviews.csv:2: no 'label' label.*columns found: text, sentiment.*"
                                        r"label_column= \(data.reader.label_column in a recipe\)"):
        read_classification(path, require_labels=True)
    ds = read_classification(path, label_column="sentiment", require_labels=True)
    assert ds["label"] == [1, 0]
    jsonl = _write(tmp_path / "reviews.jsonl", '{"text": "很好", "y": "pos"}\n')
    with pytest.raises(DataError, match=r"reviews.jsonl:1: no 'label' label.*columns found: text, y"):
        read_classification(jsonl, require_labels=True)


GBK_FILES = {  # reader, file name, text (Chinese from line 3 on), reader options, check
    "csv": (read_classification, "a.csv", "text,label\nok,pos\n好吃,pos\n难吃,neg\n", {},
            lambda ds: ds["text"] == ["ok", "好吃", "难吃"]),
    "tsv": (read_classification, "a.tsv", "text\tlabel\nok\tpos\n好吃\tpos\n", {},
            lambda ds: ds["text"] == ["ok", "好吃"]),
    "jsonl": (read_classification, "a.jsonl", '{"text": "ok", "label": "a"}\n\n{"text": "好", "label": "b"}\n', {},
              lambda ds: ds["text"] == ["ok", "好"]),
    "conll": (read_conll, "a.txt", "a O\n\n北 B-LOC\n京 I-LOC\n", {},
              lambda ds: ds["tokens"] == [["a"], ["北", "京"]]),
    "paddle": (read_paddle_ner, "a.tsv", "text_a\tlabel\na\x02b\tO\x02O\n北\x02京\tB-LOC\x02I-LOC\n", {},
               lambda ds: ds["tokens"][1] == ["北", "京"]),
}


@pytest.mark.parametrize("kind", GBK_FILES)
def test_gbk_files_name_file_and_line_and_read_with_encoding(tmp_path, kind):
    reader, name, text, options, check = GBK_FILES[kind]
    path = tmp_path / name
    path.write_bytes(text.encode("gbk"))
    with pytest.raises(DataError, match=rf"{name}:3: not utf-8 text .*encoding='gbk' \(data.reader.encoding: gbk"):
        reader(path, **options)
    assert check(reader(path, encoding="gbk", **options))


def test_gbk_squad_file_reads_with_encoding(tmp_path):
    path = _squad(tmp_path / "utf8.json", 7)
    gbk = tmp_path / "gbk.json"
    gbk.write_bytes(path.read_text(encoding="utf-8").encode("gbk"))
    with pytest.raises(DataError, match=r"gbk.json:1: not utf-8 text"):
        read_squad(gbk)
    assert read_squad(gbk, encoding="gbk")["answers"] == read_squad(path)["answers"]
    with pytest.raises(DataError, match=r"unknown encoding 'gbkk'"):
        read_squad(gbk, encoding="gbkk")


def test_a_lone_surrogate_in_a_json_file_names_the_record_and_field(tmp_path):
    # valid JSON, not text: the dataset writer used to fail on it with a UnicodeEncodeError trace
    lines = tmp_path / "lines.jsonl"
    lines.write_text('{"text": "好", "label": "positive"}\n{"text": "ab\\ud800c", "label": "negative"}\n',
                     encoding="utf-8")
    with pytest.raises(DataError, match=r"lines.jsonl:2: text holds a lone surrogate '\\ud800' at character 2"):
        read_classification(str(lines))
    squad = tmp_path / "squad.json"
    squad.write_text(json.dumps({"data": [{"paragraphs": [{"context": "北京", "qas": [
        {"id": "q1", "question": "哪\ud800里", "answers": [{"text": "北京", "answer_start": 0}]}]}]}]}),
        encoding="utf-8")
    with pytest.raises(DataError, match=r"squad.json record 0: paragraphs\[0\].qas\[0\].question holds a lone "
                                        r"surrogate"):
        read_squad(str(squad))
