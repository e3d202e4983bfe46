"""text-correction through every layer as a user runs it: an export (fp32 and int8) checked against
PyTorch, the pipeline on the export, `nlp predict` and `nlp evaluate` with the task's options, and
`nlp serve` on 127.0.0.1 answering the shape the playground draws. A tiny random model whose
correction head leans towards one character, so that what it changes is known."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
import torch

import nlp
from cli_server import cli_server, run_nlp
from nlp.tasks.correction.heads import ErnieForSpellingCorrection
from nlp.tokenizer import load_tokenizer

from tasks._task_fixtures import tiny_config

ERNIE_TINY = Path(nlp.__file__).parent / "assets" / "ernie-tiny-zh"
TEXTS = ["我😀爱 ＡＢＣ１２３，abc 北京👨‍👩‍👧张爱文。", "天气很好" * 40, "１２３"]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    tok = load_tokenizer(ERNIE_TINY)
    torch.manual_seed(0)
    model = ErnieForSpellingCorrection(tiny_config(tok.vocab_size)).eval()
    with torch.no_grad():  # most characters, not all, become 友
        model.mlm_bias[tok.convert_tokens_to_ids("友")] = 8.0
    out = tmp_path_factory.mktemp("csc") / "model"
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return out


@pytest.fixture(scope="module")
def exports(model_dir):
    from nlp.deploy.export import export_model

    fp32, int8 = model_dir.parent / "export", model_dir.parent / "export-int8"
    export_model(model_dir, fp32)
    export_model(model_dir, int8, quantize="int8")
    return fp32, int8


def test_exports_agree_with_pytorch_and_the_pipeline_runs_on_them(model_dir, exports):
    fp32, int8 = exports
    manifest = json.loads((fp32 / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["task"] == "text-correction"
    assert manifest["outputs"] == [{"name": "logits", "dtype": "float32", "shape": ["batch", "sequence", "vocab"]},
                                   {"name": "detection_logits", "dtype": "float32", "shape": ["batch", "sequence"]}]
    assert manifest["check"]["fp32"]["max_abs_diff"] <= 1e-4 and manifest["check"]["fp32"]["label_agreement"] == 1.0
    q = json.loads((int8 / "manifest.json").read_text(encoding="utf-8"))["check"]
    agreement = q.get("int8", q.get("fp32"))["label_agreement"]
    assert 0.5 <= agreement <= 1.0  # what int8 changes of the best character per position, reported
    torch_pipe = nlp.pipeline("text-correction", model=str(model_dir))
    onnx_pipe = nlp.pipeline("text-correction", model=str(fp32))
    ours, theirs = torch_pipe(TEXTS, threshold=0.3), onnx_pipe(TEXTS, threshold=0.3)
    assert [r["target"] for r in ours] == [r["target"] for r in theirs]
    assert any(r["errors"] for r in ours) and ours[2]["errors"] == []
    for r, text in zip(theirs, TEXTS):
        assert r["source"] == text and len(r["target"]) == len(text)
        for e in r["errors"]:
            assert text[e["start"]:e["end"]] == next(iter(e["correction"]))
    for a, b in zip(ours[0]["errors"], theirs[0]["errors"]):
        assert a["position"] == b["position"] and a["score"] == pytest.approx(b["score"], abs=1e-4)
    nlp.pipeline("text-correction", model=str(int8))(TEXTS[:1])  # int8 runs through the same pipeline


def test_predict_and_evaluate_take_the_task_options(model_dir, exports, tmp_path):
    fp32, _ = exports
    texts = tmp_path / "texts.jsonl"
    texts.write_text("".join(json.dumps({"text": t}, ensure_ascii=False) + "\n" for t in TEXTS[:1]) + "\n",
                     encoding="utf-8")
    rows = [json.loads(line) for line in
            run_nlp("predict", str(fp32), "--input", str(texts), "--threshold", "0.3", "--protected", "北京,张爱文")
            .stdout.splitlines()]
    assert rows[1] == {"text": "", "correction": {"source": "", "target": "", "errors": []}}
    changed = {e["position"] for e in rows[0]["correction"]["errors"]}
    assert changed and changed <= {0, 2} and rows[0]["correction"]["target"][15:] == TEXTS[0][15:]
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("我的朋有\t我的朋友\n天气很好\t天气很好\n", encoding="utf-8")
    strict = json.loads(run_nlp("evaluate", str(fp32), "--data", str(pairs), "--threshold", "1.0").stdout)
    loose = json.loads(run_nlp("evaluate", str(model_dir), "--data", str(pairs), "--threshold", "0.0").stdout)
    assert strict["sentences_changed"] == 0 and strict["false_positive_rate"] == 0.0
    assert loose["sentences_changed"] >= 1 and 0.0 <= loose["sentence_correction_f1"] <= 1.0


def test_it_serves_corrections_in_the_playground_shape(model_dir):
    with cli_server(str(model_dir), ["--precision", "fp32", "--device", "cpu"]) as url:
        r = httpx.post(url + "/predict", json={"inputs": TEXTS[0], "parameters": {"threshold": 0.3,
                                                                                  "protected": "北京"}}, timeout=60)
        assert r.status_code == 200, r.text
        one = r.json()
        assert set(one) == {"source", "target", "errors"} and one["source"] == TEXTS[0]
        for e in one["errors"]:  # render.js's corrections renderer: integer position, {wrong: right}
            assert isinstance(e["position"], int) and len(e["correction"]) == 1
            assert TEXTS[0][e["position"]] in e["correction"] and e["position"] not in (15, 16)
        many = httpx.post(url + "/predict", json={"inputs": TEXTS[:2]}, timeout=60)
        assert many.status_code == 200 and len(many.json()) == 2
        bad = httpx.post(url + "/predict", json={"inputs": "天气", "parameters": {"threshold": 3}}, timeout=60)
        assert bad.status_code == 422 and "threshold" in bad.json()["message"]
        bad = httpx.post(url + "/predict", json={"inputs": "天气", "parameters": {"top_k": 3}}, timeout=60)
        assert bad.status_code == 422 and "valid: threshold, protected" in bad.json()["message"]
        doc = httpx.get(url + "/openapi.json", timeout=30).json()
        params = doc["paths"]["/predict"]["post"]["requestBody"]["content"]["application/json"]["schema"][
            "properties"]["parameters"]["properties"]
        assert params["threshold"]["maximum"] == 1.0 and "protected" in params
