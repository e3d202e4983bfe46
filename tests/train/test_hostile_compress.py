"""Commands that write a model directory, under hostile use (beside tests/deploy/test_serve_hostile.py
and tests/deploy/test_export_hostile.py): does the new directory carry every file the model
needs and keep its storage format; are bad inputs refused with a message, not a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import nlp
from nlp.cli import main

pytestmark = pytest.mark.timeout(600)

LEXICAL = Path(nlp.__file__).parent / "assets" / "ernie-tiny-zh-lexical"
SENTIMENT = Path(nlp.__file__).parent / "assets" / "ernie-tiny-zh-sentiment-small"
NER = Path(nlp.__file__).parent / "assets" / "ernie-tiny-zh-ner"  # shipped in fp16
CORPUS = ["我宁愿把内存加大一点。", "今天天气很好，我们去北京大学散步。", "江泽民在北京发表讲话"]


def _format(path: Path) -> tuple[str, set[str]]:
    from safetensors import safe_open

    with safe_open(str(path), "pt") as f:
        return (f.metadata() or {}).get("format"), {f.get_slice(k).get_dtype() for k in f.keys()}


def _words(model_dir: Path, texts: list[str]) -> list[list[str]]:
    lac = nlp.pipeline("lexical-analysis", model=str(model_dir))
    return [[w["word"] for w in r["words"]] for r in lac(texts)]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("corpus") / "texts.txt"
    path.write_text("\n".join(CORPUS) + "\n", encoding="utf-8")
    return path


def test_prune_vocab_of_the_lexical_model_keeps_its_lexicon_and_int8_storage(corpus, tmp_path, capsys):
    """The word lexicon was dropped (宁愿 -> 宁/愿, 内存 -> 内/存) and the weights written in fp32 (3.64
    MB -> 10.54 MB); also `--corpus` alone was refused for wanting --data."""
    out = tmp_path / "small"
    assert main(["prune-vocab", str(LEXICAL), "--out", str(out), "--corpus", str(corpus)]) == 0, \
        capsys.readouterr().err
    assert (out / "lexicon.tsv").read_bytes() == (LEXICAL / "lexicon.tsv").read_bytes()
    assert _format(out / "model.safetensors") == _format(LEXICAL / "model.safetensors")
    assert (out / "model.safetensors").stat().st_size < (LEXICAL / "model.safetensors").stat().st_size
    words = _words(out, CORPUS)
    assert words == _words(LEXICAL, CORPUS)
    assert "宁愿" in words[0] and "内存" in words[0]


def test_prune_vocab_of_an_fp16_model_stays_fp16(corpus, tmp_path):
    out = tmp_path / "small"
    assert _format(NER / "model.safetensors")[1] == {"F16"}
    assert main(["prune-vocab", str(NER), "--out", str(out), "--corpus", str(corpus)]) == 0
    assert _format(out / "model.safetensors")[1] == {"F16"}


def test_prune_width_of_the_lexical_model_keeps_its_lexicon_and_int8_storage(tmp_path):
    out = tmp_path / "narrow"
    assert main(["prune-width", str(LEXICAL), "--out", str(out), "--neurons", "0.75", "--examples", "16",
                 "--batch-size", "8", "--data", "peoples-daily-1998-lexical", "--split", "dev"]) == 0
    assert (out / "lexicon.tsv").read_bytes() == (LEXICAL / "lexicon.tsv").read_bytes()
    assert _format(out / "model.safetensors") == _format(LEXICAL / "model.safetensors")
    assert (out / "model.safetensors").stat().st_size < (LEXICAL / "model.safetensors").stat().st_size
    assert nlp.pipeline("lexical-analysis", model=str(out)).lexicon is not None


def test_prune_vocab_of_a_corpus_that_is_not_utf8_names_file_line_and_byte(tmp_path, capsys):
    bad = tmp_path / "gbk.txt"
    bad.write_bytes("今天天气很好\n".encode() + "天气".encode("gbk") + b"\n")
    assert main(["prune-vocab", str(LEXICAL), "--out", str(tmp_path / "o"), "--corpus", str(bad)]) == 2
    err = capsys.readouterr().err
    assert f"{bad}:2: not UTF-8 text" in err and "byte offset 19" in err and "Traceback" not in err
    assert not (tmp_path / "o").exists()


def test_export_refuses_an_empty_keep_fp32(tmp_path, capsys):
    """`--keep-fp32 ""` read as "keep nothing in fp32": every group quantized, silently."""
    assert main(["export", str(SENTIMENT), "--out", str(tmp_path / "e"), "--quantize", "int8-static",
                 "--keep-fp32", ""]) == 2
    err = capsys.readouterr().err
    assert "--keep-fp32" in err and "empty" in err
    assert not (tmp_path / "e").exists()


def test_training_lines_escape_a_word_opening_with_a_bracket(tmp_path, capsys):
    """A word starting with a half-width `[` made its line blank (exit 0); it is escaped now and
    reads back through the training-file reader to the same words and POS."""
    from nlp.tasks.lexical.data import read_tagged_words
    from nlp.tasks.lexical.tags import POS_TAGS

    src = tmp_path / "in.txt"
    src.write_text("他说[注]这是北京\n[1]今天\\n天气\n\n[[好\n", encoding="utf-8")
    out = tmp_path / "train.txt"
    assert main(["predict", str(LEXICAL), "--input", str(src), "--output", str(out), "--format", "training"]) == 0
    assert "left blank" not in capsys.readouterr().err
    lines = out.read_text(encoding="utf-8").split("\n")
    rows = [json.loads(r)["analysis"]["words"] for r in _predict_jsonl(src, tmp_path) if json.loads(r)["text"]]
    assert lines[0] and lines[1] and lines[2] == "" and lines[3]  # the blank input line stays blank
    assert any(w["word"].startswith("[") for ws in rows for w in ws)  # the case is exercised
    assert any(w["word"].startswith("\\") for ws in rows for w in ws)  # and a word opening with the escape
    back = read_tagged_words(out)
    assert [list(r["words"]) for r in back] == [[w["word"] for w in ws] for ws in rows]
    assert [[POS_TAGS[p] for p in r["pos"]] for r in back] == [[w["pos"] for w in ws] for ws in rows]


def _predict_jsonl(src: Path, tmp: Path) -> list[str]:
    out = tmp / "rows.jsonl"
    assert main(["predict", str(LEXICAL), "--input", str(src), "--output", str(out)]) == 0
    return out.read_text(encoding="utf-8").splitlines()


def test_serve_predict_pipeline_and_export_window_a_run_alike(tmp_path):
    """`nlp serve RUN` said max_length 64 (the recipe's) in /info, where nlp.pipeline on the run
    and its export used the pipeline's default: the two servers windowed texts differently."""
    import torch
    import yaml

    from nlp.deploy import export_model
    from nlp.deploy.server_model import load_pipeline_for_serving
    from nlp.tasks.embedding.heads import ErnieForSentenceEmbedding
    from nlp.tokenizer import load_tokenizer

    asset = Path(nlp.__file__).parent / "assets" / "ernie-tiny-zh"
    run = tmp_path / "run"
    torch.manual_seed(0)
    ErnieForSentenceEmbedding.from_pretrained(asset).save_pretrained(run / "model")
    load_tokenizer(asset).save_pretrained(run / "model")
    (run / "recipe.yaml").write_text(yaml.safe_dump({"task": {"name": "feature-extraction"},
                                                     "data": {"dataset": "xinhua-idioms", "max_length": 64}}))
    exported = export_model(run, tmp_path / "export").out
    lengths = {"nlp.pipeline(run)": nlp.pipeline("feature-extraction", model=str(run)).max_length,
               "nlp.pipeline(export)": nlp.pipeline("feature-extraction", model=str(exported)).max_length,
               "serve run": load_pipeline_for_serving(run, precision="fp32").max_length,
               "serve export": load_pipeline_for_serving(exported, precision="fp32").max_length}
    assert set(lengths.values()) == {64}, lengths
    assert nlp.pipeline("feature-extraction", model=str(run), max_length=32).max_length == 32  # asked for
