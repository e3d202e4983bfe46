"""benchmarks/compress.py's plan and report, without building or timing anything: every row of
every task has a plan, NER's rows score both test sets against the NER teacher, and the targets
are computed per scored column."""

from __future__ import annotations

import argparse

import pytest

from _benchmark_module import load_benchmark

compress = load_benchmark("compress.py", "bench_compress")


@pytest.mark.parametrize("name", sorted(compress.TASKS))
def test_every_row_of_a_task_has_a_plan_and_its_teacher_is_shipped_or_asked_for(name):
    task = compress.TASKS[name]
    assert set(task.rows) <= set(compress.ROW_PLAN)
    for row in task.rows:
        model, quantize, precision = compress.ROW_PLAN[row]
        assert model in ("teacher", "plain", "distilled", "distilled-pruned", "width")
        assert (quantize is None) != (precision is None)  # an export, or a PyTorch precision
    if task.teacher is None:  # never the shipped student compared with itself
        with pytest.raises(SystemExit, match="give --teacher"):
            compress._teacher(task)
    else:
        assert (compress._teacher(task) / "config.json").is_file()


def test_ner_compares_an_unshipped_teacher_on_both_test_sets():
    task = compress.TASKS["ner"]
    assert task.teacher is None and task.metric == "f1"
    assert task.scored == (("zh-ner", "test"), ("peoples-daily-1998-ner", "test"))
    assert {"teacher-int8-dyn", "distilled-int8-dyn", "distilled-int8-static", "student-plain"} <= set(task.rows)


def _row(name, f1s, texts_per_s, bytes_=1e6):
    cols = ("zh-ner test", "peoples-daily-1998-ner test")
    return {"row": name, "scores": dict(zip(cols, f1s)), "bytes": bytes_, "texts_per_s": texts_per_s, "p50_ms": 1.0}


def test_targets_per_scored_column():
    best = {"teacher-fp32": _row("teacher-fp32", (0.817, 0.829), 100.0),
            "student-plain": _row("student-plain", (0.790, 0.800), 300.0),
            "student-distilled": _row("student-distilled", (0.805, 0.820), 320.0)}
    lines = [line.strip() for line in compress.targets(best, ["zh-ner test", "peoples-daily-1998-ner test"])]
    assert "distilled - plain student           +1.50, +2.00 points (target >= +1)" in lines
    assert "distilled - teacher                 -1.20, -0.90 points (target >= -1)" in lines
    assert "distilled / teacher fp32 throughput 3.20x (target >= 3x)" in lines
    assert not any("static" in line for line in lines)  # rows that did not run are left out


def test_rounds_keep_the_best_speed_and_the_scores(capsys):
    first = _row("student-distilled", (0.8, 0.81), 300.0)
    later = {**first, "scores": None, "texts_per_s": 250.0, "p50_ms": 0.5}  # a later round is not scored again
    merged = compress.merge_rounds(compress.merge_rounds(None, first), later)
    assert merged["texts_per_s"] == 300.0 and merged["p50_ms"] == 0.5 and merged["scores"] == first["scores"]
    args = argparse.Namespace(task="ner", rows=["student-distilled", "teacher-fp32"], threads=2, rounds=2)
    compress.report({"student-distilled": merged}, args)
    out = capsys.readouterr().out
    assert "| student-distilled | 0.8000 | 0.8100 | 1.00 | 300 | 0.50 |" in out
    assert "| teacher-fp32 | failed | | | |" in out


def test_a_timing_only_run_reports_no_scores(capsys):
    timed = {**_row("student-distilled", (0.8, 0.81), 300.0), "scores": None}
    teacher = {**_row("teacher-fp32", (0.817, 0.829), 100.0), "scores": None}
    args = argparse.Namespace(task="ner", rows=["teacher-fp32", "student-distilled"], threads=2, rounds=2)
    compress.report({"teacher-fp32": teacher, "student-distilled": timed}, args)
    out = capsys.readouterr().out
    assert "| student-distilled | - | - | 1.00 | 300 | 1.00 |" in out
    assert "distilled - teacher                 - points" in out
    assert "distilled / teacher fp32 throughput 3.00x" in out


def test_the_teacher_rows_run_the_teacher_given(tmp_path):
    teacher = compress._teacher(compress.TASKS["sentiment"])  # any model directory stands in
    ner = compress.TASKS["ner"]
    paths = compress.prepare(tmp_path, tmp_path / "plain", tmp_path / "distilled", ner, ("teacher-fp32",), None, teacher)
    assert paths == {"teacher-fp32": teacher}
    with pytest.raises(SystemExit, match="give --teacher"):
        compress.prepare(tmp_path, tmp_path / "plain", tmp_path / "distilled", ner, ("teacher-fp32",))


def test_a_preset_shape_gets_random_weights_with_the_teachers_tokenizer_and_labels(tmp_path):
    import json

    target = compress.shape_model("ernie-3.0-nano-zh", tmp_path)
    config = json.loads((target / "config.json").read_text(encoding="utf-8"))
    teacher = json.loads((compress._teacher() / "config.json").read_text(encoding="utf-8"))
    assert (config["hidden_size"], config["num_hidden_layers"]) == (312, 4)  # the preset's shape
    assert config["vocab_size"] == teacher["vocab_size"] and config["id2label"] == teacher["id2label"]
    assert (target / "vocab.txt").read_text(encoding="utf-8") == (compress._teacher() / "vocab.txt").read_text(
        encoding="utf-8")
    assert compress.shape_model("ernie-3.0-nano-zh", tmp_path) == target  # built once


def test_static_variant_rows_are_valid_static_exports_of_the_teacher():
    from nlp.deploy.quantize import STATIC_KEEP_FP32, keep_fp32_groups

    assert compress.STATIC_VARIANTS[0] == "teacher-int8-static"
    choices = {STATIC_KEEP_FP32}
    for row in compress.STATIC_VARIANTS[1:]:
        assert compress.ROW_PLAN[row] == ("teacher", "int8-static", None)
        keep = keep_fp32_groups("int8-static", compress.KEEP_FP32[row])  # each names real groups
        assert set(keep) != set(STATIC_KEEP_FP32)
        choices.add(keep)
    assert len(choices) == len(compress.STATIC_VARIANTS)  # every row a different choice
