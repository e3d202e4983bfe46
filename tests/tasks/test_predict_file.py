"""`nlp predict` input files (issue 15 §5): one output per line, lines as given, errors by file:line."""

from __future__ import annotations

import json

import pytest

from nlp._common import ConfigError, DataError
from nlp.tasks.predict_file import predict_rows, read_inputs


def test_blank_lines_are_kept_and_text_is_not_stripped(tmp_path):
    p = tmp_path / "in.txt"
    p.write_bytes("\ufeff第一行\n\n  前面有空格\t\r\n   \n最后一行".encode("utf-8"))
    rows = read_inputs(p, "token-classification")
    assert rows == [{"text": "第一行"}, None, {"text": "  前面有空格\t"}, None, {"text": "最后一行"}]
    lines = tmp_path / "lines.txt"
    lines.write_text("a\u2028b\x1cc\n", encoding="utf-8")  # only \n ends a line
    assert read_inputs(lines, "text-classification") == [{"text": "a\u2028b\x1cc"}]


def test_predict_rows_gives_an_empty_result_for_a_blank_line():
    calls = []

    def ner(texts):
        calls.append(texts)
        return [[{"type": "PER", "text": t.strip()[:1], "start": len(t) - len(t.lstrip()), "end": len(t) - len(t.lstrip()) + 1}]
                for t in texts]

    out = predict_rows(ner, [{"text": " 张三"}, None, {"text": "李四"}], "token-classification")
    assert calls == [[" 张三", "李四"]]  # one batched call, blank lines skipped
    assert out[1] == {"text": "", "entities": []} and out[0]["entities"][0]["start"] == 1
    qa = predict_rows(lambda question, context: [{"answer": "x"}] * len(question),
                      [None, {"question": "q", "context": "c"}], "question-answering")
    assert qa == [{"text": "", "answer": None}, {"question": "q", "context": "c", "answer": {"answer": "x"}}]


def test_gbk_file_names_file_and_line_and_can_be_read_with_encoding(tmp_path):
    p = tmp_path / "gbk.txt"
    p.write_bytes("好的\n".encode("utf-8") + "这家餐厅很好\n".encode("gbk"))
    with pytest.raises(DataError, match=rf"{p}:2: not valid utf-8 .*--encoding gbk"):
        read_inputs(p, "text-classification")
    q = tmp_path / "all-gbk.txt"
    q.write_bytes("这家餐厅很好\n\n太难吃了\n".encode("gbk"))
    assert read_inputs(q, "text-classification", encoding="gbk") == [{"text": "这家餐厅很好"}, None, {"text": "太难吃了"}]
    with pytest.raises(ConfigError, match="--encoding 'klingon' is not a known text encoding"):
        read_inputs(q, "text-classification", encoding="klingon")


def test_jsonl_null_or_non_string_text_names_file_and_line(tmp_path):
    p = tmp_path / "in.jsonl"
    p.write_text(json.dumps({"text": "好"}) + "\n\n" + json.dumps({"text": None}) + "\n", encoding="utf-8")
    with pytest.raises(DataError, match=rf"{p}:3: 'text' is null; expected a string"):
        read_inputs(p, "text-classification")
    p.write_text(json.dumps({"text": "好", "text_pair": 5}) + "\n", encoding="utf-8")
    with pytest.raises(DataError, match=rf"{p}:1: 'text_pair' is a int \(5\); expected a string"):
        read_inputs(p, "text-classification")
    p.write_text(json.dumps({"question": "谁", "context": ["x"]}) + "\n", encoding="utf-8")
    with pytest.raises(DataError, match=rf"{p}:1: 'context' is a list"):
        read_inputs(p, "question-answering")
    p.write_text("{not json\n", encoding="utf-8")
    with pytest.raises(DataError, match=rf"{p}:1: not a JSON object"):
        read_inputs(p, "text-classification")


def test_a_jsonl_record_without_its_field_names_the_fields_it_has_and_the_fix(tmp_path):
    p = tmp_path / "in.jsonl"
    p.write_text(json.dumps({"text": "好"}) + "\n" + json.dumps({"txt": "坏"}) + "\n", encoding="utf-8")
    with pytest.raises(DataError, match=rf"{p}:2: the object lacks 'text' \(its fields are 'txt'\); rename 'txt' to 'text'"):
        read_inputs(p, "text-classification")
    p.write_text(json.dumps({"question": "谁", "passage": "张三"}) + "\n", encoding="utf-8")
    with pytest.raises(DataError, match=r":1: the object lacks 'context' \(its fields are 'question', 'passage'\); "
                                        r"give each line 'question', 'context'"):
        read_inputs(p, "question-answering")
    p.write_text("{}\n[1, 2]\n", encoding="utf-8")
    with pytest.raises(DataError, match=r":1: the object lacks 'text' \(it has no fields\)"):
        read_inputs(p, "token-classification")
    p.write_text("[1, 2]\n", encoding="utf-8")
    with pytest.raises(DataError, match=r":1: expected an object with 'text', got \[1, 2\]"):
        read_inputs(p, "token-classification")


@pytest.mark.parametrize("output, message", [
    ("outdir", "is a directory; give a file path (e.g. '{root}/outdir/out.jsonl')"),
    ("FILE/out.jsonl", "its parent '{root}/FILE' is a file, not a directory; choose a directory you can write to"),
    ("/proc/nlp-test.jsonl", "cannot write in '/proc'"),
])
def test_an_output_that_cannot_be_written_is_refused_in_one_line_before_predicting(tmp_path, monkeypatch, capsys,
                                                                                   output, message):
    import nlp.tasks.predict_file as predict_file
    from nlp.cli import main

    def never(*args, **kwargs):
        raise AssertionError("predicted before --output was checked")

    monkeypatch.setattr(predict_file, "predict_file", never)
    (tmp_path / "outdir").mkdir()
    (tmp_path / "FILE").write_text("someone's file")
    src = tmp_path / "in.txt"
    src.write_text("上海\n", encoding="utf-8")
    out = output if output.startswith("/") else str(tmp_path / output)
    assert main(["predict", "--task", "ner", "--input", str(src), "--output", out]) == 2
    err = capsys.readouterr().err
    assert f"--output {out!r}" in err and message.format(root=tmp_path) in err, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert (tmp_path / "FILE").read_text() == "someone's file" and not list((tmp_path / "outdir").iterdir())


@pytest.mark.parametrize("encoding, bom", [("utf-16", ""), ("utf-16-le", ""), ("utf-16-be", ""),
                                           ("utf-16-le", "\ufeff"), ("utf-16-be", "\ufeff"), ("utf-32", ""),
                                           ("utf-32-le", ""), ("utf-32-be", "\ufeff")])
def test_utf16_and_utf32_files_are_read_line_by_line(tmp_path, encoding, bom):
    # 上 is U+4E0A: its UTF-16/32 bytes hold 0x0A, which is not a line end there
    p = tmp_path / "in.txt"
    p.write_bytes((bom + "上海\n\n 北京\r\n上").encode(encoding))
    assert read_inputs(p, "token-classification", encoding=encoding) == [
        {"text": "上海"}, None, {"text": " 北京"}, {"text": "上"}]


def test_an_invalid_utf16_file_names_its_line_without_the_gbk_hint(tmp_path):
    p = tmp_path / "in.txt"
    p.write_bytes("上海\n北京\n".encode("utf-16") + b"\x00\xd8a\x00")  # a lone surrogate on line 3
    with pytest.raises(DataError, match=rf"{p}:3: not valid utf-16 .*--encoding") as err:
        read_inputs(p, "token-classification", encoding="utf-16")
    assert "GBK" not in str(err.value) and "\n" not in str(err.value)
    gbk = tmp_path / "gbk.txt"
    gbk.write_bytes("上海\n".encode("utf-8") + "北京\n".encode("gbk"))
    with pytest.raises(DataError, match=rf"{gbk}:2: not valid utf-8 .*--encoding gbk"):
        read_inputs(gbk, "token-classification")
    with pytest.raises(DataError, match=rf"{gbk}:1: not valid ascii") as err:
        read_inputs(gbk, "token-classification", encoding="ascii")
    assert "GBK" not in str(err.value)
