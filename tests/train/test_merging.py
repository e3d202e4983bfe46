"""Weight averaging (nlp/train/merging.py, `nlp merge`): every weight the weighted mean of the
sources', the rest from the first source; mismatched models and bad weights refused with the fix."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
import torch

import nlp
from nlp._common import ConfigError
from nlp.cli import main
from nlp.tasks import get_task
from nlp.tokenizer import load_tokenizer
from nlp.train.merging import merge_models

ASSET = Path(nlp.__file__).parent / "assets" / "ernie-tiny-zh"
LABELS = {0: "O", 1: "B-PER", 2: "I-PER"}


def _model_dir(root: Path, name: str, seed: int, labels: dict = LABELS, layers: int = 1) -> Path:
    torch.manual_seed(seed)
    cfg = nlp.AutoConfig.from_pretrained(ASSET, hidden_size=32, num_hidden_layers=layers, num_attention_heads=2,
                                         intermediate_size=64, id2label=labels)
    model = get_task("token-classification").head(cfg)
    model.save_pretrained(root / name)
    load_tokenizer(ASSET).save_pretrained(root / name)
    return root / name


@pytest.fixture(scope="module")
def pair(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("merge")
    return _model_dir(root, "a", 0), _model_dir(root, "b", 1)


def _state(path: Path) -> dict:
    return get_task("token-classification").head.from_pretrained(path).state_dict()


def test_every_weight_is_the_weighted_mean_and_the_result_runs(pair, tmp_path, capsys):
    a, b = pair
    assert main(["merge", str(a), str(b), "--weights", "0.25", "0.75", "--out", str(tmp_path / "m")]) == 0
    assert "merged" in capsys.readouterr().out
    merged, sa, sb = _state(tmp_path / "m"), _state(a), _state(b)
    for name, tensor in merged.items():
        if tensor.is_floating_point():
            torch.testing.assert_close(tensor, 0.25 * sa[name] + 0.75 * sb[name])
    assert json.loads((tmp_path / "m" / "config.json").read_text())["id2label"] == {str(k): v for k, v in LABELS.items()}
    ner = nlp.pipeline("ner", model=str(tmp_path / "m"))
    assert isinstance(ner("张三在北京工作"), list)
    merge_models([a, b], None, tmp_path / "equal")  # default: equal weights
    torch.testing.assert_close(_state(tmp_path / "equal")["classifier.weight"],
                               (sa["classifier.weight"] + sb["classifier.weight"]) / 2)


def test_a_tokenizer_file_that_differs_is_taken_from_the_first_and_logged(pair, tmp_path, caplog):
    a, b = pair
    other = tmp_path / "b2"
    other.mkdir()
    for f in b.iterdir():
        (other / f.name).write_bytes(f.read_bytes())
    vocab = (other / "vocab.txt").read_text(encoding="utf-8").splitlines()
    (other / "vocab.txt").write_text("\n".join(vocab[:-1] + ["[unused-x]"]) + "\n", encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="nlp.train.merging"):
        r = merge_models([a, other], [0.5, 0.5], tmp_path / "m")
    assert r.differing_tokenizer_files == ["vocab.txt"]
    assert "vocab.txt differ: the merged model reads the first model's" in caplog.text
    assert (tmp_path / "m" / "vocab.txt").read_bytes() == (a / "vocab.txt").read_bytes()


def test_bad_weights_and_mismatched_models_are_refused_and_nothing_is_written(pair, tmp_path):
    a, b = pair
    out = tmp_path / "m"
    cases = [
        (([a, b], [0.5, 0.6]), r"sum to 1\.1; give weights that sum to 1 \(e\.g\. 0\.455 0\.545\)"),
        (([a, b], [1.0]), r"1 given for 2 models; give one weight per model"),
        (([a, b], [-0.5, 1.5]), r"each weight must be a number >= 0"),
        (([a], None), r"give two or more models to merge \(got 1\)"),
        (([a, _model_dir(tmp_path, "labels", 2, labels={0: "O", 1: "B-LOC", 2: "I-LOC"})], None),
         r"has the labels .* merge models with the same labels"),
        (([a, _model_dir(tmp_path, "deeper", 3, layers=2)], None), r"different parameters .* one architecture"),
    ]
    for (sources, weights), message in cases:
        with pytest.raises(ConfigError, match=message):
            merge_models(sources, weights, out)
        assert not out.exists()
    out.mkdir()
    with pytest.raises(ConfigError, match="exists; choose a new directory"):
        merge_models([a, b], None, out)
    assert main(["merge", str(a), str(b), "--weights", "0.5", "0.6", "--out", str(tmp_path / "cli")]) == 2


@pytest.mark.parametrize("where, message", [
    ("FILE/sub", "its parent '{root}/FILE' is a file, not a directory; choose a directory you can write to"),
    ("/proc/nlp-merge-test", "cannot write in '/proc'"),
])
def test_an_out_that_cannot_be_written_is_refused_in_one_line_before_any_work(pair, tmp_path, capsys, monkeypatch,
                                                                              where, message):
    import nlp.train.merging as merging

    def never(*args, **kwargs):
        raise AssertionError("loaded the models before --out was checked")

    monkeypatch.setattr(merging, "locate_model", never)
    (tmp_path / "FILE").write_text("someone's file")
    a, b = pair
    out = where if where.startswith("/") else str(tmp_path / where)
    assert main(["merge", str(a), str(b), "--out", out]) == 2
    err = capsys.readouterr().err
    assert f"--out {out!r}" in err and message.format(root=tmp_path) in err, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert (tmp_path / "FILE").read_text() == "someone's file"
