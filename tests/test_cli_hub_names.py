"""The commands that take a model directory also take a registered hub name (`nlp hub ls`): the
package's own models are evaluated, exported, predicted with, pruned and merged by name, offline;
a misspelt name is told the names that look like it; a missing path keeps the directory message."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nlp.cli import main
from nlp.commands._models import local_model

NAME = "ernie-tiny-zh-sentiment-small"  # the smallest shipped model


def test_evaluate_by_name(capsys):
    assert main(["evaluate", NAME, "--data", "reviews-zh", "--split", "test", "--max-samples", "40"]) == 0
    scores = json.loads(capsys.readouterr().out)
    assert scores["examples"] == 40 and scores["accuracy"] > 0.75, scores
    assert scores["model"] == NAME


def test_predict_by_name(tmp_path, capsys):
    texts = tmp_path / "in.txt"
    texts.write_text("这家餐厅的服务非常好，菜也很新鲜。\n质量太差了，用了两天就坏了。\n", encoding="utf-8")
    out = tmp_path / "out.jsonl"
    assert main(["predict", NAME, "--input", str(texts), "--output", str(out)]) == 0
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [r["labels"][0]["label"] for r in rows] == ["positive", "negative"]


def test_export_by_name(tmp_path, capsys):
    out = tmp_path / "export"
    assert main(["export", NAME, "--out", str(out)]) == 0
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["task"] == "text-classification"
    assert "max |ONNX - PyTorch|" in capsys.readouterr().out


def test_prune_by_name(tmp_path, capsys):
    corpus = tmp_path / "texts.txt"
    corpus.write_text("这家餐厅的服务非常好，菜也很新鲜。\n质量太差了，用了两天就坏了。\n", encoding="utf-8")
    assert main(["prune-vocab", NAME, "--out", str(tmp_path / "small-vocab"), "--corpus", str(corpus)]) == 0
    assert "kept " in capsys.readouterr().out
    assert main(["prune-width", NAME, "--out", str(tmp_path / "narrow"), "--neurons", "0.5", "--data", "reviews-zh",
                 "--split", "dev", "--examples", "16", "--batch-size", "8"]) == 0
    assert "feed-forward neurons" in capsys.readouterr().out
    config = json.loads((tmp_path / "narrow" / "config.json").read_text(encoding="utf-8"))
    assert config["intermediate_size"] * 2 == json.loads(
        (Path(local_model(NAME)) / "config.json").read_text(encoding="utf-8"))["intermediate_size"]


def test_merge_by_name(tmp_path, capsys):
    """A model averaged with itself is itself: the name resolves to the one snapshot, twice."""
    out = tmp_path / "merged"
    assert main(["merge", NAME, NAME, "--out", str(out)]) == 0
    assert "merged " in capsys.readouterr().out
    assert main(["evaluate", str(out), "--data", "reviews-zh", "--split", "test", "--max-samples", "40"]) == 0
    merged = json.loads(capsys.readouterr().out)
    assert main(["evaluate", NAME, "--data", "reviews-zh", "--split", "test", "--max-samples", "40"]) == 0
    assert merged["accuracy"] == json.loads(capsys.readouterr().out)["accuracy"]


def test_merging_models_of_two_tasks_names_them_as_given(tmp_path, capsys):
    assert main(["merge", NAME, "ernie-tiny-zh-ner", "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err
    assert f"ernie-tiny-zh-ner is a token-classification model and {NAME} a text-classification one" in err, err
    assert "snapshots" not in err and not (tmp_path / "x").exists()


@pytest.mark.parametrize("command", [["evaluate", "--data", "test"], ["predict", "--input", "x.txt"],
                                     ["export", "--out", "x"], ["prune-vocab", "--out", "x", "--corpus", "c.txt"],
                                     ["prune-width", "--out", "x"], ["merge", NAME, "--out", "x"]])
def test_a_misspelt_name_gets_the_names_like_it(command, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main([command[0], NAME[:-2], *command[1:]]) == 2
    err = capsys.readouterr().err
    assert "neither a directory nor a registered model name" in err and repr(NAME) in err, err
    assert not (tmp_path / "x").exists()


def test_a_missing_path_keeps_the_directory_message(tmp_path, capsys):
    assert main(["export", str(tmp_path / "runs" / "nope"), "--out", str(tmp_path / "x")]) == 2
    assert "does not exist" in capsys.readouterr().err
