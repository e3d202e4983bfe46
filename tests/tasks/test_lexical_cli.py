"""The lexical tasks through the `nlp` command, as for NER: fine-tune a few steps on the built-in
peoples-daily-1998-lexical (from the shipped ernie-tiny-zh), evaluate, predict (lexical analysis
and, from the same run, word segmentation), export (fp32 and int8) and serve."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from cli_server import cli_server, nlp_env, run_nlp

import nlp
from nlp.tasks import datasets as nds
from nlp.tasks.lexical.lexicon import LEXICON_FILE, WordLexicon

ERNIE_TINY = Path(nlp.__file__).parent / "assets" / "ernie-tiny-zh"
RECIPE = Path(nlp.__file__).parent / "recipes" / "lexical-peoples-daily.yaml"
TEXTS = ["江泽民在北京发表新年讲话。", "１９９８年1月，Hello 世界😀！", "中国人民银行"]


def _nlp(*args: str) -> subprocess.CompletedProcess:
    return run_nlp(*args)


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("lexical")
    _nlp("finetune", str(RECIPE), f"model.name={ERNIE_TINY}", f"train.output_dir={tmp / 'run'}", "train.max_steps=4",
         "data.max_train_samples=64", "data.max_eval_samples=32", "data.max_length=64", "train.data.batch_size=16",
         "train.eval.every_steps=4", "train.mixed_precision=no", "train.optim.lr=3e-3",
         "train.log.progress_bar=false", "train.log.tensorboard=false", "train.log.plots=false")
    return tmp


def test_it_trains_evaluates_and_predicts_each_task(run):
    results = json.loads((run / "run" / "results.json").read_text(encoding="utf-8"))
    assert results["task"] == "lexical-analysis" and results["summary"]["metric"] == "word_f1"
    for split in ("dev", "test"):
        assert set(results[split]) >= {"word_f1", "pos_accuracy", "word_pos_f1", "entity_f1"}
        assert 0.0 < results[split]["word_f1"] <= 1.0
    config = json.loads((run / "run" / "model" / "config.json").read_text(encoding="utf-8"))
    assert config["architectures"] == ["ErnieForLexicalAnalysis"] and len(config["id2label"]) == 168
    # the run's model holds the word lexicon of its training sentences, which its pipelines decode with
    lexicon = WordLexicon.load(run / "run" / "model")
    train_words = {w for ws in nds.load("peoples-daily-1998-lexical", "train").select(range(64))["words"] for w in ws}
    assert lexicon.weight == 12.0 and 50 < len(lexicon) and set(lexicon.wordhood) <= train_words
    assert nlp.pipeline("word-segmentation", model=str(run / "run")).lexicon.wordhood == lexicon.wordhood
    scores = json.loads(_nlp("evaluate", str(run / "run"), "--data", "test", "--max-samples", "32").stdout)
    assert scores["word_f1"] == pytest.approx(results["test"]["word_f1"], abs=1e-6)
    path = run / "in.txt"
    path.write_text("\n".join([TEXTS[0], "", TEXTS[1]]) + "\n", encoding="utf-8")
    lines = [json.loads(x) for x in _nlp("predict", str(run / "run"), "--input", str(path)).stdout.splitlines()]
    assert lines[1] == {"text": "", "analysis": {"words": [], "entities": []}}
    words = lines[2]["analysis"]["words"]
    assert [w["word"] for w in words] and all(TEXTS[1][w["start"]:w["end"]] == w["word"] for w in words)
    segs = [json.loads(x) for x in _nlp("predict", str(run / "run"), "--task", "word-segmentation",
                                        "--input", str(path)).stdout.splitlines()]
    assert segs[1]["words"] == [] and segs[2]["words"] == [{k: w[k] for k in ("word", "start", "end")} for w in words]


def test_predictions_written_as_training_lines_read_back_and_extend_the_train_split(run):
    from nlp.tasks.lexical.data import read_tagged_words
    from nlp.train.finetune import load_task_data
    from nlp.train.recipe import load_recipe

    path = run / "unlabelled.txt"
    path.write_text("\n".join([TEXTS[0], "", "[注]北京", TEXTS[1]]) + "\n", encoding="utf-8")
    out = run / "labelled.txt"
    done = _nlp("predict", str(run / "run"), "--task", "pos-tagging", "--input", str(path), "--format", "training",
                "--output", str(out))
    # "[注]..." opens with a word beginning with "[", which word/POS would read as a bracketed
    # compound: written escaped (\\[), it reads back as the word
    assert "left blank" not in done.stderr
    lines = out.read_text(encoding="utf-8").split("\n")
    assert lines[1] == "" and lines[2].startswith("\\[") and lines[4] == "" and len(lines) == 5
    predicted = [json.loads(x)["words"] for x in _nlp("predict", str(run / "run"), "--task", "pos-tagging",
                                                      "--input", str(path)).stdout.splitlines()]
    back = read_tagged_words(out)  # blank lines skipped
    names = back.features["pos"].feature.names
    assert len(back) == 3
    for row, words in zip(back, [predicted[0], predicted[2], predicted[3]]):
        assert row["words"] == [w["word"] for w in words] and [names[i] for i in row["pos"]] == [w["pos"] for w in words]
    # they join the built-in training sentences (data.extra_train), after them
    recipe = load_recipe(RECIPE, [f"data.extra_train=[{out}]", "data.dev_split=null", "data.test_split=null"])
    train = load_task_data(recipe).splits["train"]
    builtin = nds.load("peoples-daily-1998-lexical", "train")
    assert len(train) == len(builtin) + 3 and train[len(builtin)]["words"] == back[0]["words"]
    assert train[-1]["pos"] == back[2]["pos"]
    # a run on them: its word lexicon holds the words of the data's own training sentences alone
    own = run / "own-train.txt"
    sentences = builtin.select(range(48))
    tags = sentences.features["pos"].feature.names
    own.write_text("\n".join(" ".join(f"{w}/{tags[p]}" for w, p in zip(r["words"], r["pos"])) for r in sentences)
                   + "\n", encoding="utf-8")
    _nlp("finetune", str(RECIPE), f"model.name={ERNIE_TINY}", f"train.output_dir={run / 'extra-run'}", "data.dataset=null",
         f"data.files.train={own}", f"data.files.dev={own}", "data.test_split=null", f"data.extra_train=[{out}]",
         "data.max_length=64", "train.max_steps=1", "train.data.batch_size=16", "train.mixed_precision=no",
         "train.log.progress_bar=false", "train.log.tensorboard=false", "train.log.plots=false")
    lexicon = WordLexicon.load(run / "extra-run" / "model")
    own_words = {w for ws in sentences["words"] for w in ws if len(w) > 1}
    teacher_words = {w for row in back for w in row["words"] if len(w) > 1} - own_words
    assert set(lexicon.wordhood) == own_words and teacher_words
    # segmentation results carry no POS: refused before anything runs, naming the tasks that write lines
    refused = subprocess.run([sys.executable, "-m", "nlp", "predict", str(run / "run"), "--task", "word-segmentation",
                              "--input", str(path), "--format", "training"], capture_output=True, text=True, env=nlp_env())
    assert refused.returncode != 0 and "tasks that write them: token-classification, lexical-analysis, pos-tagging." in refused.stderr
    assert "Traceback" not in refused.stderr


@pytest.mark.parametrize("quantize", [None, "int8"])
def test_export_runs_every_lexical_task(run, quantize):
    out = run / f"export-{quantize or 'fp32'}"
    _nlp("export", str(run / "run"), "--out", str(out), *(["--quantize", quantize] if quantize else []))
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["task"] == "lexical-analysis"
    # the word lexicon travels with the export, checked by its sha256 like every file there
    assert (out / LEXICON_FILE).read_bytes() == (run / "run" / "model" / LEXICON_FILE).read_bytes()
    assert LEXICON_FILE in manifest["files"]
    assert nlp.pipeline("pos-tagging", model=str(out)).lexicon is not None
    local = nlp.pipeline("pos-tagging", model=str(run / "run" / "model"))(TEXTS)
    exported = nlp.pipeline("pos-tagging", model=str(out))(TEXTS)  # a task sharing the head runs its export
    seg = nlp.pipeline("word-segmentation", model=str(out))(TEXTS)
    for text, words in zip(TEXTS, seg):
        assert "".join(w["word"] for w in words) == text.replace(" ", "")
    if quantize is None:
        assert exported == local
    else:  # int8: most words agree
        same = sum(w in b for a, b in zip(exported, local) for w in a)
        assert same >= 0.7 * sum(map(len, local))
    path = run / "in-export.txt"
    path.write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    lines = [json.loads(x) for x in _nlp("predict", str(out), "--task", "word-segmentation", "--input",
                                         str(path)).stdout.splitlines()]
    assert [r["words"] for r in lines] == seg


def test_a_release_of_the_run_carries_its_lexicon(run, tmp_path):
    from nlp.ship import read_finetuned_run, write_release

    write_release(read_finetuned_run(run / "run"), tmp_path / "release", name="tiny-lexical", license="mit")
    assert (tmp_path / "release" / LEXICON_FILE).read_bytes() == (run / "run" / "model" / LEXICON_FILE).read_bytes()
    assert (tmp_path / "release" / "README.md").read_text(encoding="utf-8").startswith("# tiny-lexical\n")
    assert nlp.pipeline("lexical-analysis", model=str(tmp_path / "release")).lexicon is not None


def test_it_serves_word_segmentation_from_a_lexical_run(run):
    with cli_server(str(run / "run"), ["--task", "word-segmentation", "--precision", "fp32", "--device", "cpu"],
                    env=nlp_env()) as url:
        local = nlp.pipeline("word-segmentation", model=str(run / "run" / "model"))
        r = httpx.post(url + "/predict", json={"inputs": TEXTS}, timeout=60)
        assert r.status_code == 200, r.text
        assert r.json() == local(TEXTS)
        one = httpx.post(url + "/predict", json={"inputs": TEXTS[0]}, timeout=60)
        assert one.status_code == 200 and one.json() == local(TEXTS[0])
        for body, match in (({"inputs": " "}, "empty"), ({"inputs": 3}, "must be a string"),
                            ({"inputs": "好", "parameters": {"top_k": 1}}, "unknown parameter 'top_k'")):
            bad = httpx.post(url + "/predict", json=body, timeout=60)
            assert bad.status_code == 422 and match in bad.text, bad.text
        doc = httpx.get(url + "/openapi.json", timeout=30).json()
        assert "/predict" in doc["paths"]
