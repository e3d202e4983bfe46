"""The embedding task through the `nlp` command: fine-tune on the built-in xinhua-idioms (a few
steps on the shipped ernie-tiny-zh), evaluate, predict, export (fp32 and int8, checked against
PyTorch by cosine) and serve TEI's /embed and /similarity beside /predict."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import httpx
import numpy as np
import pytest

import nlp
from cli_server import cli_server, finetune_few_steps, nlp_env, run_nlp

TEXTS = ["形容十分安定稳当。", "安安稳稳：元·无名氏《抱妆盒》第四折小储君倒也安安稳稳守着妆盒做护身符。",
         "这家餐厅的服务非常好，菜也好吃"]


def _env() -> dict[str, str]:
    return nlp_env()


def _nlp(*args: str) -> subprocess.CompletedProcess:
    return run_nlp(*args)


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("embed")
    finetune_few_steps("embedding-idioms", tmp / "run", "data.max_length=48")
    return tmp


def test_it_trains_and_evaluates_retrieval(run):
    results = json.loads((run / "run" / "results.json").read_text(encoding="utf-8"))
    assert results["task"] == "feature-extraction"
    for split in ("dev", "test"):
        assert set(results[split]) >= {"recall@1", "recall@10", "mrr"}
        assert 0.0 < results[split]["mrr"] <= 1.0 and results[split]["recall@1"] <= results[split]["recall@10"]
    model = run / "run" / "model"
    assert json.loads((model / "config.json").read_text())["pooling"] == "mean"
    assert (model / "modules.json").is_file()  # sentence-transformers' layout
    scores = json.loads(_nlp("evaluate", str(run / "run"), "--data", "test", "--max-samples", "24").stdout)
    assert scores["mrr"] == pytest.approx(results["test"]["mrr"], abs=1e-6)


def test_a_pipeline_takes_the_run_directory_as_readme_shows(run, tmp_path):
    """README: nlp.pipeline("feature-extraction", model="runs/embedding-idioms"), the run's
    train.output_dir, is its RUN/model; a run that has not finished says so."""
    from nlp._common import ConfigError

    by_run = nlp.pipeline("feature-extraction", model=str(run / "run"))(TEXTS)
    np.testing.assert_array_equal(by_run, nlp.pipeline("feature-extraction", model=str(run / "run" / "model"))(TEXTS))
    unfinished = tmp_path / "unfinished"
    (unfinished / "checkpoints").mkdir(parents=True)
    (unfinished / "recipe.yaml").write_text("task: {name: feature-extraction}\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="a run that has not finished has none yet"):
        nlp.pipeline("feature-extraction", model=str(unfinished))


def test_predict_writes_one_vector_per_line(run):
    path = run / "in.txt"
    path.write_text("\n".join([TEXTS[0], "", TEXTS[2]]) + "\n", encoding="utf-8")
    lines = [json.loads(line) for line in _nlp("predict", str(run / "run"), "--input", str(path)).stdout.splitlines()]
    assert [r["text"] for r in lines] == [TEXTS[0], "", TEXTS[2]]
    assert lines[1]["embedding"] is None
    vec = np.asarray(lines[0]["embedding"])
    assert vec.shape == (256,) and np.linalg.norm(vec) == pytest.approx(1.0, abs=1e-5)


@pytest.mark.parametrize("quantize", [None, "int8"])
def test_export_matches_pytorch_by_cosine(run, quantize):
    out = run / f"export-{quantize or 'fp32'}"
    args = ["export", str(run / "run"), "--out", str(out)] + (["--quantize", quantize] if quantize else [])
    printed = _nlp(*args).stdout
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["task"] == "feature-extraction"
    assert manifest["outputs"] == [{"name": "sentence_embedding", "dtype": "float32", "shape": ["batch", "hidden"]}]
    if quantize:  # no head linear to keep in float: every encoder linear is int8 (qkv inside QAttention)
        import onnx

        assert manifest["quantization"]["kept_fp32"] == {"classifier": []}
        low = manifest["check"]["int8"]["min_cosine"]  # vectors are checked by cosine, not by an argmax
        assert 0.95 <= low <= 1.0 and f"vectors' cosine with PyTorch >= {low:.5f}" in printed
        assert "labels agree" not in printed
        ops = [n.op_type for n in onnx.load(str(out / "model.onnx")).graph.node]
        layers = json.loads((out / "config.json").read_text(encoding="utf-8"))["num_hidden_layers"]
        assert ops.count("QAttention") == layers and ops.count("MatMulInteger") == 3 * layers
        assert "MatMul" not in ops
    torch_vecs = nlp.pipeline("feature-extraction", model=str(run / "run" / "model"))(TEXTS)
    onnx_vecs = nlp.pipeline("feature-extraction", model=str(out))(TEXTS)
    cosines = (torch_vecs * onnx_vecs).sum(-1)  # both normalised
    assert cosines.min() >= (0.9999 if quantize is None else 0.95), cosines
    # nlp evaluate on the export: retrieval over the grouped (query, document) features
    scores = json.loads(_nlp("evaluate", str(out), "--data", "test", "--max-samples", "24").stdout)
    results = json.loads((run / "run" / "results.json").read_text(encoding="utf-8"))
    assert scores["mrr"] == pytest.approx(results["test"]["mrr"], abs=1e-3 if quantize is None else 0.1)



def test_it_serves_tei_routes(run):
    with cli_server(str(run / "run"), ["--precision", "fp32", "--device", "cpu"], env=_env()) as url:
        local = nlp.pipeline("feature-extraction", model=str(run / "run" / "model"))
        r = httpx.post(url + "/embed", json={"inputs": TEXTS}, timeout=60)
        assert r.status_code == 200, r.text
        served = np.asarray(r.json())
        assert served.shape == (3, 256)
        np.testing.assert_allclose(served, local(TEXTS), atol=1e-4)
        one = httpx.post(url + "/embed", json={"inputs": TEXTS[0], "normalize": False, "truncate": True}, timeout=60)
        assert one.status_code == 200 and len(one.json()) == 1  # TEI: always a list of vectors
        np.testing.assert_allclose(one.json()[0], local(TEXTS[0], normalize=False, truncate=True), rtol=1e-4, atol=1e-4)
        sim = httpx.post(url + "/similarity", json={"inputs": {"source_sentence": TEXTS[0],
                                                               "sentences": [TEXTS[0], TEXTS[2]]}}, timeout=60)
        assert sim.status_code == 200 and sim.json()[0] == pytest.approx(1.0, abs=1e-4) and len(sim.json()) == 2
        for body, route, match in (({"inputs": []}, "/embed", "empty list"),
                                   ({"inputs": "好", "normalize": "yes"}, "/embed", "true or false"),
                                   ({"inputs": "好", "truncation": True}, "/embed", "unknown field 'truncation'"),
                                   ({"inputs": " "}, "/embed", "empty"),
                                   ({"inputs": {"source_sentence": "好", "sentences": "好"}}, "/similarity",
                                    "must be a list"),
                                   ({"inputs": ["好"]}, "/similarity", "source_sentence")):
            bad = httpx.post(url + route, json=body, timeout=60)
            assert bad.status_code == 422, (body, bad.text)
            assert bad.json()["error_type"] == "Validation" and match in bad.json()["error"], bad.json()
        dense = httpx.post(url + "/embed_sparse", json={"inputs": "好"}, timeout=60)  # no lexical weights
        assert dense.status_code == 422 and "no lexical weights" in dense.json()["error"], dense.text
        pred = httpx.post(url + "/predict", json={"inputs": [TEXTS[2]]}, timeout=60)
        assert pred.status_code == 200 and np.asarray(pred.json()).shape == (1, 256)
        doc = httpx.get(url + "/openapi.json", timeout=30).json()
        assert {"/predict", "/embed", "/similarity"} <= set(doc["paths"])
        assert "normalize" in json.dumps(doc["paths"]["/embed"]["post"]["requestBody"])
        metrics = httpx.get(url + "/metrics", timeout=30).text
        assert 'nlp_serve_requests_total{endpoint="/embed",status="200"} 2' in metrics
