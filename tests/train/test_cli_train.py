"""The CLI of issue 6 section 3: nlp finetune / evaluate / predict / recipes, run in-process."""

from __future__ import annotations

import json

import pytest
from launched import run_launched

from nlp.cli import main

from train._recipe_fixtures import tiny_overrides


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("cli") / "sentiment"
    assert main(["finetune", "recipes/sentiment-reviews.yaml", *tiny_overrides(out)]) == 0
    return out


def test_finetune_prints_dev_and_test_scores(run_dir, capsys):
    assert (run_dir / "model" / "model.safetensors").is_file()
    results = json.loads((run_dir / "results.json").read_text(encoding="utf-8"))
    assert set(results["dev"]) >= {"accuracy", "macro_f1"} and "accuracy" in results["test"]


def test_evaluate_a_run_on_a_named_dataset_and_a_file(run_dir, tmp_path, capsys):
    assert main(["evaluate", str(run_dir), "--data", "reviews-zh", "--split", "dev", "--max-samples", "20"]) == 0
    scores = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert scores["examples"] == 20 and 0.0 <= scores["accuracy"] <= 1.0
    data = tmp_path / "mine.jsonl"
    data.write_text('{"text": "很好用，推荐", "label": "positive"}\n{"text": "太差了", "label": "negative"}\n',
                    encoding="utf-8")
    assert main(["evaluate", str(run_dir / "model"), "--data", str(data)]) == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["examples"] == 2
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "还行", "label": "neutral"}\n', encoding="utf-8")
    assert main(["evaluate", str(run_dir), "--data", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "neutral" in err and "bad.jsonl:1" in err


def test_predict_writes_one_json_line_per_input(run_dir, tmp_path, capsys):
    src = tmp_path / "in.txt"
    src.write_text("这家酒店的服务非常好\n\n质量太差了，不推荐\n", encoding="utf-8")
    dest = tmp_path / "out.jsonl"
    assert main(["predict", str(run_dir), "--input", str(src), "--output", str(dest), "--top-k", "2"]) == 0
    rows = [json.loads(line) for line in dest.read_text(encoding="utf-8").splitlines()]
    # one output line per input line: the blank line gets an empty result (issue 15 §5)
    assert [r["text"] for r in rows] == ["这家酒店的服务非常好", "", "质量太差了，不推荐"]
    assert rows.pop(1)["labels"] == []
    for r in rows:
        assert {x["label"] for x in r["labels"]} == {"negative", "positive"}
        assert sum(x["score"] for x in r["labels"]) == pytest.approx(1.0, abs=1e-5)


def test_an_existing_run_is_resumed_or_refused_never_overwritten(run_dir, tmp_path, capsys):
    before = (run_dir / "model" / "model.safetensors").read_bytes()
    # same command again: resumes the finished run (no new steps), same tokenizer
    assert main(["finetune", "recipes/sentiment-reviews.yaml", *tiny_overrides(run_dir)]) == 0
    assert (run_dir / "model" / "model.safetensors").read_bytes() == before
    # ... and with more steps it continues from the checkpoint
    assert main(["finetune", "recipes/sentiment-reviews.yaml", *tiny_overrides(run_dir, steps=4)]) == 0
    assert json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))["steps"] == 4
    capsys.readouterr()
    assert main(["finetune", "recipes/sentiment-reviews.yaml", *tiny_overrides(run_dir, steps=4),
                 "train.resume=never"]) == 2
    assert "already holds a run" in capsys.readouterr().err
    other = tmp_path / "not-a-run"
    other.mkdir()
    (other / "notes.txt").write_text("keep me", encoding="utf-8")
    assert main(["finetune", "recipes/sentiment-reviews.yaml", *tiny_overrides(other)]) == 2
    assert "refusing to overwrite" in capsys.readouterr().err
    assert (other / "notes.txt").read_text(encoding="utf-8") == "keep me"


def test_bad_recipes_fail_before_any_work_with_every_problem(tmp_path, capsys):
    out = tmp_path / "never"
    code = main(["finetune", "recipes/sentiment-reviews.yaml", *tiny_overrides(out),
                 "model.preset=null", "model.name=ernie-3.0-mni-zh", "train.optim.lrr=1", "data.max_length=x"])
    assert code == 2 and not out.exists()
    err = capsys.readouterr().err
    assert "3 problems" in err or "4 problems" in err
    assert "Did you mean 'ernie-3.0-mini-zh'" in err and "Did you mean 'lr'" in err
    assert "data.max_length: expected an integer" in err


def test_recipes_ls_cp_validate(tmp_path, capsys):
    assert main(["recipes", "ls"]) == 0
    listed = capsys.readouterr().out
    assert "sentiment-reviews" in listed and "clue-tnews" in listed
    assert main(["recipes", "cp", "sentiment-reviews", str(tmp_path)]) == 0
    copied = tmp_path / "sentiment-reviews.yaml"
    assert copied.read_text(encoding="utf-8").startswith("# nlp finetune recipes/sentiment-reviews.yaml")
    assert main(["recipes", "cp", "sentiment-reviews", str(tmp_path)]) == 2  # never overwrites
    assert main(["recipes", "cp", "sentimnt-reviews", str(tmp_path / "x.yaml")]) == 2
    assert "Did you mean 'sentiment-reviews'" in capsys.readouterr().err
    assert main(["recipes", "validate", str(copied), "train.epochs=1"]) == 0
    assert main(["recipes", "validate", str(copied), "train.epoch=1", "data.dataset=reviews"]) == 2
    err = capsys.readouterr().err
    assert "2 problems" in err and "train.epoch: unknown key" in err and "data.dataset" in err


def test_recipes_cp_to_a_path_under_a_file_is_refused_in_one_line(tmp_path, capsys):
    (tmp_path / "FILE").write_text("someone's file")
    dest = tmp_path / "FILE" / "x.yaml"
    assert main(["recipes", "cp", "ner-zh", str(dest)]) == 2
    err = capsys.readouterr().err
    assert f"DEST {str(dest)!r}: its parent {str(tmp_path / 'FILE')!r} is a file, not a directory" in err, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert (tmp_path / "FILE").read_text() == "someone's file"


def test_qa_run_evaluates_and_predicts_from_the_cli(tmp_path, capsys):
    from train._recipe_fixtures import cmrc_files, data_overrides

    run = tmp_path / "qa"
    assert main(["finetune", "recipes/qa-cmrc2018.yaml", *tiny_overrides(run),
                 *data_overrides("qa-cmrc2018", tmp_path)]) == 0
    dev = json.loads((run / "results.json").read_text(encoding="utf-8"))["dev"]
    capsys.readouterr()
    assert main(["evaluate", str(run), "--data", cmrc_files(tmp_path)["dev"]]) == 0
    scores = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert scores["exact_match"] == pytest.approx(dev["exact_match"]) and scores["f1"] == pytest.approx(dev["f1"])
    questions = tmp_path / "q.jsonl"
    context = "张三在北京大学工作了十年。"
    questions.write_text(json.dumps({"question": "谁在北京大学工作？", "context": context}, ensure_ascii=False) + "\n",
                         encoding="utf-8")
    assert main(["predict", str(run), "--input", str(questions)]) == 0
    answer = json.loads(capsys.readouterr().out.strip().splitlines()[-1])["answer"]
    assert context[answer["start"]:answer["end"]] == answer["answer"]


def test_accelerate_launch_runs_nlp_finetune_on_two_processes(tmp_path):
    """The README's launch line, as written: `-m nlp` under accelerate gives 2 ranks (gloo)."""
    import os
    import shutil
    import sys
    from pathlib import Path

    launcher = shutil.which("accelerate", path=str(Path(sys.executable).parent))
    if launcher is None:
        pytest.skip("accelerate's launcher is not installed next to this python")
    out = tmp_path / "ddp"
    cmd = [launcher, "launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1",
           "--mixed_precision", "no", "--dynamo_backend", "no", "-m", "nlp", "finetune",
           "recipes/sentiment-reviews.yaml", *tiny_overrides(out)]
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": "1"}
    proc = run_launched(cmd, cwd=Path(__file__).resolve().parents[2], env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert summary["processes"] == 2 and summary["steps"] == 3
    assert proc.stdout.count("run: ") == 1  # one report, from the main process


@pytest.mark.parametrize("command,recipe", [("finetune", "recipes/sentiment-reviews.yaml"),
                                            ("pretrain", "recipes/pretrain/ernie-tiny-zh.yaml")])
def test_validate_only_takes_overrides_before_or_after_it(command, recipe, tmp_path, capsys):
    """Issue 15: `nlp finetune RECIPE --validate-only key=value` was refused by argparse."""
    out = tmp_path / "out"
    for args in (["--validate-only", f"train.output_dir={out}", "train.max_steps=2"],
                 [f"train.output_dir={out}", "--validate-only", "train.max_steps=2"],
                 [f"train.output_dir={out}", "train.max_steps=2", "--validate-only"]):
        assert main([command, recipe, *args]) == 0, args
        assert "OK" in capsys.readouterr().out and not out.exists()
    assert main([command, recipe, "--validate-only", f"train.output_dir={out}", "train.optim.lr=inf"]) == 2
    assert "train.optim.lr: expected a finite number, got 'inf'" in capsys.readouterr().err
    # the overrides keep their order: the last one wins
    assert main([command, recipe, "train.optim.lr=nan", "--validate-only", "train.optim.lr=1e-4"]) == 0
    with pytest.raises(SystemExit):  # an unknown option is still an error
        main([command, recipe, "--validate-only", "--no-such-flag", "train.max_steps=2"])
    assert "unrecognized arguments: --no-such-flag" in capsys.readouterr().err


@pytest.mark.parametrize("value,shown", [("nan", "'nan'"), ("inf", "'inf'"), (".inf", "inf"), ("1e999", "'1e999'")])
def test_non_finite_learning_rates_fail_validation(value, shown, tmp_path, capsys):
    out = tmp_path / "never"
    code = main(["finetune", "recipes/sentiment-reviews.yaml", "--validate-only", f"train.optim.lr={value}",
                 f"train.output_dir={out}"])
    assert code == 2 and not out.exists()
    assert f"train.optim.lr: expected a finite number, got {shown}" in capsys.readouterr().err


def test_an_absurd_model_size_fails_fast_without_a_traceback(tmp_path, capsys):
    """Issue 15: num_hidden_layers 10**9 in a config.json allocated until memory ran out."""
    import time

    model = tmp_path / "huge"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"hidden_size": 32, "num_attention_heads": 2,
                                                   "num_hidden_layers": 10**9}))
    out = tmp_path / "never"
    start = time.perf_counter()
    code = main(["finetune", "recipes/sentiment-reviews.yaml", f"model.name={model}", f"train.output_dir={out}"])
    assert code == 2 and time.perf_counter() - start < 5 and not out.exists()  # before the data is read
    err = capsys.readouterr().err
    assert "Traceback" not in err and f"{model / 'config.json'}: this config describes a model of about" in err
    assert "num_hidden_layers=1000000000" in err and "bytes" in err
