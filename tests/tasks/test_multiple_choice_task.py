"""The proof that a task is one package: a multiple-choice task (inputs batch x choices x
sequence) defined in tests/tasks/multiple_choice_task/, outside `nlp`, registered with the public
`register_task` and loaded by the CLI through $NLP_TASK_PLUGINS, trains, evaluates, exports,
predicts and serves through the `nlp` command with no change inside `nlp/` made for it."""

from __future__ import annotations

import json
import random
import subprocess
from pathlib import Path

import httpx
import pytest

import nlp
from cli_server import cli_server, nlp_env, run_nlp
from nlp._common import ConfigError
from nlp.tasks import get_task
from nlp.tasks.registry import PLUGIN_ENV

import tasks.multiple_choice_task as mc_task  # registers the task in this process

TESTS = Path(__file__).resolve().parents[1]
ERNIE_TINY = Path(nlp.__file__).parent / "assets" / "ernie-tiny-zh"
PLUGIN = "tasks.multiple_choice_task"

_KINDS = {
    "水果": ["苹果", "香蕉", "西瓜", "葡萄", "橙子", "草莓", "桃子", "梨"],
    "动物": ["老虎", "熊猫", "小狗", "小猫", "骏马", "兔子", "狮子", "大象"],
    "城市": ["北京", "上海", "广州", "杭州", "成都", "南京", "西安", "武汉"],
}


def _examples(n: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        kind = rng.choice(list(_KINDS))
        choices = [rng.choice(words) for words in _KINDS.values()]
        rng.shuffle(choices)
        right = next(i for i, c in enumerate(choices) if c in _KINDS[kind])
        out.append({"question": f"下面哪一个是{kind}？", "choices": choices, "label": right})
    return out


def _write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def _env() -> dict[str, str]:
    return nlp_env({PLUGIN_ENV: PLUGIN}, paths=[TESTS])


def _nlp(*args: str) -> subprocess.CompletedProcess:
    return run_nlp(*args, env=_env())


def _nlp_fails(*args: str) -> subprocess.CompletedProcess:
    """`nlp ARGS...` expected to fail: its exit status and output, for the test to check."""
    import sys

    return subprocess.run([sys.executable, "-m", "nlp", *args], capture_output=True, text=True, env=_env(), timeout=600)


def test_the_task_registers_from_outside_the_package():
    spec = get_task("MC")
    assert spec is mc_task.MULTIPLE_CHOICE and spec.name == "multiple-choice"
    assert type(spec).__module__ == "tasks.multiple_choice_task.spec"
    assert spec.export_axes()["input_ids"] == ("batch", "choices", "sequence")
    assert spec.empty_prediction() == {"answer": None}
    # its own typed settings section, checked by the schema engine with a did-you-mean
    from nlp.train.recipe import recipe_from_dict

    with pytest.raises(ConfigError, match=r"task.num_choice: unknown key\. Did you mean 'num_choices'\?"):
        recipe_from_dict({"task": {"name": "mc", "num_choice": 3}, "model": {"name": str(ERNIE_TINY)},
                          "data": {"dataset": "reviews-zh"}})
    with pytest.raises(ConfigError, match="num_choices must be >= 2"):
        recipe_from_dict({"task": {"name": "mc", "num_choices": 1}, "model": {"name": str(ERNIE_TINY)},
                          "data": {"dataset": "reviews-zh"}})


def test_a_plugin_that_cannot_be_imported_is_named(monkeypatch):
    from nlp.tasks import registry

    monkeypatch.setenv(PLUGIN_ENV, "no_such_plugin_module")
    with pytest.raises(ConfigError, match=r"NLP_TASK_PLUGINS \(no_such_plugin_module\) cannot be imported"):
        registry.get_task("no-such-task")



@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """`nlp finetune` on a recipe written here: a few steps on the shipped ernie-tiny-zh."""
    tmp = tmp_path_factory.mktemp("mc")
    files = {"train": _write_jsonl(tmp / "train.jsonl", _examples(24, 0)),
             "dev": _write_jsonl(tmp / "dev.jsonl", _examples(6, 1)),
             "test": _write_jsonl(tmp / "test.jsonl", _examples(6, 2))}
    recipe = tmp / "mc.yaml"
    recipe.write_text(f"""# nlp finetune {recipe}
task:
  name: multiple-choice
  num_choices: 3                     # every question has three candidate answers
model:
  name: {ERNIE_TINY}
data:
  files: {{train: {files['train']}, dev: {files['dev']}, test: {files['test']}}}
  max_length: 32
train:
  output_dir: {tmp / 'run'}
  max_steps: 4
  cpu: true
  mixed_precision: "no"
  data: {{batch_size: 4, batching: length_grouped}}
  eval: {{metric: accuracy}}
  log: {{tensorboard: false, plots: false, progress_bar: false}}
""", encoding="utf-8")
    _nlp("finetune", str(recipe))
    return tmp


def test_it_trains_and_evaluates_through_the_cli(run):
    results = json.loads((run / "run" / "results.json").read_text(encoding="utf-8"))
    assert results["task"] == "multiple-choice"
    assert set(results["dev"]) >= {"loss", "accuracy"} and 0.0 <= results["test"]["accuracy"] <= 1.0
    config = json.loads((run / "run" / "model" / "config.json").read_text(encoding="utf-8"))
    assert config["architectures"] == ["ErnieForMultipleChoice"]
    saved = (run / "run" / "recipe.yaml").read_text(encoding="utf-8")
    assert "num_choices: 3" in saved  # the task section is written back with its own knobs
    scores = json.loads(_nlp("evaluate", str(run / "run"), "--data", "test").stdout)
    assert scores["examples"] == 6 and scores["accuracy"] == pytest.approx(results["test"]["accuracy"])


def test_it_exports_checks_and_predicts_through_the_cli(run):
    out = run / "export"
    text = _nlp("export", str(run / "run"), "--out", str(out)).stdout
    assert "exported multiple-choice model (fp32" in text
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["task"] == "multiple-choice"
    assert [i["shape"] for i in manifest["inputs"]] == [["batch", "choices", "sequence"]] * 3
    assert manifest["outputs"] == [{"name": "logits", "dtype": "float32", "shape": ["batch", "choices"]}]
    assert manifest["check"]["fp32"]["max_abs_diff"] <= 1e-4 and manifest["check"]["fp32"]["label_agreement"] == 1.0
    questions = _write_jsonl(run / "q.jsonl", [{"question": "下面哪一个是城市？", "choices": ["西瓜", "杭州", "熊猫"]},
                                               {"question": "下面哪一个是动物？", "choices": ["兔子", "南京"]}])
    questions.write_text(questions.read_text(encoding="utf-8") + "\n", encoding="utf-8")  # a blank line
    by_run = [json.loads(line) for line in _nlp("predict", str(run / "run"), "--input", str(questions)).stdout.splitlines()]
    by_export = [json.loads(line) for line in _nlp("predict", str(out), "--input", str(questions)).stdout.splitlines()]
    assert len(by_run) == 3 and by_run[2] == {"text": "", "answer": None}
    for a, b in zip(by_run[:2], by_export[:2]):
        assert a["answer"]["label"] == b["answer"]["label"] and a["answer"]["choice"] in a["choices"]
        assert len(a["answer"]["scores"]) == len(a["choices"])
        assert a["answer"]["score"] == pytest.approx(b["answer"]["score"], abs=1e-4)
    scores = json.loads(_nlp("evaluate", str(out), "--data", "test").stdout)  # the export, on onnxruntime
    assert "accuracy" in scores and "loss" not in scores
    # the task's declared call option is a flag of `nlp predict`, checked against its bounds
    unsure = [json.loads(line) for line in
              _nlp("predict", str(out), "--input", str(questions), "--min-score", "1").stdout.splitlines()]
    assert [u["answer"]["choice"] for u in unsure[:2]] == [None, None]
    assert unsure[0]["answer"]["scores"] == pytest.approx(by_export[0]["answer"]["scores"], abs=1e-6)
    bad = _nlp_fails("predict", str(out), "--input", str(questions), "--min-score", "2")
    assert bad.returncode == 2 and "min_score must be a number >= 0 and <= 1, got 2.0" in bad.stderr
    other = _nlp_fails("predict", str(out), "--input", str(questions), "--top-k", "2")
    assert other.returncode == 2 and "unknown option 'top_k' for multiple-choice (valid: min_score)" in other.stderr
    listed = _nlp("tasks", "multiple-choice").stdout
    assert "--min-score: min_score (float, default 0.0, >= 0, <= 1)" in listed
    assert "--min-score" in _nlp("predict", "--help").stdout


def test_it_serves_through_the_cli(run):
    with cli_server(str(run / "run"), ["--precision", "fp32", "--device", "cpu"], env=_env()) as url:
        one = {"question": "下面哪一个是水果？", "choices": ["草莓", "成都", "大象"]}
        r = httpx.post(url + "/predict", json={"inputs": one}, timeout=60)
        assert r.status_code == 200, r.text
        assert set(r.json()) == {"label", "choice", "score", "scores"} and r.json()["choice"] in one["choices"]
        r = httpx.post(url + "/predict", json={"inputs": [one, {**one, "choices": ["上海", "葡萄"]}]}, timeout=60)
        assert r.status_code == 200 and len(r.json()) == 2 and len(r.json()[1]["scores"]) == 2
        bad = httpx.post(url + "/predict", json={"inputs": {"question": "哪一个？", "choices": "苹果"}}, timeout=60)
        assert bad.status_code == 422 and "choices must be a list" in bad.json()["message"]
        doc = httpx.get(url + "/openapi.json", timeout=30).json()
        schema = json.dumps(doc["paths"]["/predict"]["post"]["requestBody"])
        assert "choices" in schema and doc["info"]["title"] == "nlp serve: multiple-choice"
        # the task's declared call option is a server parameter: checked, documented, passed on
        assert json.loads(schema)["content"]["application/json"]["schema"]["properties"]["parameters"][
            "properties"]["min_score"]["maximum"] == 1.0
        unsure = httpx.post(url + "/predict", json={"inputs": one, "parameters": {"min_score": 1.0}}, timeout=60)
        assert unsure.status_code == 200 and unsure.json()["choice"] is None, unsure.text
        bad = httpx.post(url + "/predict", json={"inputs": one, "parameters": {"min_score": 1.5}}, timeout=60)
        assert bad.status_code == 422 and "parameters.min_score must be a number >= 0 and <= 1" in bad.json()["message"]
        info = httpx.get(url + "/info", timeout=30).json()
        assert info["task"] == "multiple-choice" and info["labels"] is None
        # the task's own route, with its own body and error shapes, batched and counted like /predict
        scores = httpx.post(url + "/scores", json=one, timeout=60)
        assert scores.status_code == 200 and len(scores.json()) == 3
        assert sum(scores.json()) == pytest.approx(1.0, abs=1e-4)
        bad = httpx.post(url + "/scores", json={"question": "哪一个？", "choices": ["苹果"]}, timeout=60)
        assert bad.status_code == 422 and bad.json()["error_type"] == "Validation"
        assert "/scores" in doc["paths"] and httpx.get(url + "/scores", timeout=30).status_code == 405
        metrics = httpx.get(url + "/metrics", timeout=30).text
        assert 'nlp_serve_requests_total{endpoint="/scores",status="200"} 1' in metrics
        assert httpx.get(url + "/nope", timeout=30).status_code == 404
