"""Information extraction deployed: `nlp export` writes both pointer outputs and checks them
against PyTorch (fp32 and int8), the pipeline runs on the export with the same spans, and
`nlp serve` takes {"inputs", "parameters": {"schema"}} over HTTP on 127.0.0.1 with the schema
validated (422 naming the bound), the same limits, auth and metrics as every route."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import httpx
import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))
import _serve_fixtures as fx

import nlp
from nlp.deploy.server_config import ServeConfig
from nlp.tasks.extraction import ErnieForInformationExtraction
from nlp.tasks.extraction.schema import MAX_SCHEMA_PROMPTS
from nlp.tokenizer import load_tokenizer

pytestmark = pytest.mark.timeout(300)

SCHEMA = ["时间", "人物", {"组织机构": ["总部"]}]
TEXTS = ["2月8日上午北京冬奥会自由式滑雪女子大跳台决赛中中国选手谷爱凌以188.25分获得金牌！",
         "华为技术有限公司成立于1987年，总部位于广东省深圳市。😀李四在ＡＢＣ公司"]
TOKEN = "密钥-🔑"


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    """A tiny random UIE model (2 layers, hidden 32) with ernie-tiny-zh's tokenizer; its heads
    drawn so that some pointers pass 0.3."""
    tok = load_tokenizer(fx.ASSET)
    torch.manual_seed(0)
    config = nlp.models.ErnieConfig.from_dict(dict(vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=2,
                                                   num_attention_heads=2, intermediate_size=64,
                                                   max_position_embeddings=128))
    model = ErnieForInformationExtraction(config)
    for head in (model.linear_start, model.linear_end):
        torch.nn.init.normal_(head.weight, std=0.3)
        torch.nn.init.constant_(head.bias, -1.0)
    out = tmp_path_factory.mktemp("uie-serve") / "model"
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return out


def _spans(result: dict) -> dict:
    return {k: [(s["start"], s["end"], _spans(s.get("relations", {}))) for s in v] for k, v in result.items()}


def test_export_checks_both_pointers_and_the_pipeline_runs_on_it(model_dir, tmp_path):
    from nlp.deploy import export_model

    fp32 = export_model(model_dir, tmp_path / "fp32")
    manifest = json.loads((fp32.out / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["task"] == "information-extraction"
    assert [o["name"] for o in manifest["outputs"]] == ["start_prob", "end_prob"]
    assert fp32.check["fp32"]["max_abs_diff"] <= 1e-5 and fp32.check["fp32"]["label_agreement"] == 1.0
    torch_pipe = nlp.pipeline("ie", model=str(model_dir), schema=SCHEMA, position_prob=0.3, precision="fp32")
    onnx_pipe = nlp.pipeline("ie", model=str(fp32.out), schema=SCHEMA, position_prob=0.3)
    want, got = torch_pipe(TEXTS), onnx_pipe(TEXTS)
    assert sum(len(v) for r in want for v in r.values()) > 0
    assert [_spans(r) for r in got] == [_spans(r) for r in want]
    for w, g in zip(want, got):
        for k in w:
            assert [s["probability"] for s in g[k]] == pytest.approx([s["probability"] for s in w[k]], abs=1e-5)
    int8 = export_model(model_dir, tmp_path / "int8", quantize="int8")
    check = int8.check["int8"]
    # a random tiny model is the hard case for int8 (no margin in its scores); the check reports it
    assert 0 <= check["max_abs_diff"] < 0.5 and 0 <= check["label_agreement"] <= 1
    assert int8.model_bytes < fp32.model_bytes
    assert isinstance(nlp.pipeline("ie", model=str(int8.out), schema=SCHEMA)(TEXTS[0]), list)


@pytest.fixture(scope="module")
def url(model_dir):
    config = ServeConfig(model=str(model_dir), precision="fp32", token=TOKEN, max_inputs=4, max_text_chars=500,
                         max_batch_tokens=1024)
    with fx.running(config) as base:
        yield base


def _post(url: str, body: dict, *, token: str | None = TOKEN) -> httpx.Response:
    headers = {"Authorization": b"Bearer " + token.encode("utf-8")} if token else {}
    return httpx.post(url + "/predict", json=body, headers=headers, timeout=60)


def test_served_answers_are_the_pipelines(url, model_dir):
    pipe = nlp.pipeline("ie", model=str(model_dir), precision="fp32")
    r = _post(url, {"inputs": TEXTS, "parameters": {"schema": SCHEMA, "position_prob": 0.3}})
    assert r.status_code == 200, r.text
    want = pipe(TEXTS, schema=SCHEMA, position_prob=0.3)
    assert [_spans(x) for x in r.json()] == [_spans(x) for x in want]
    one = _post(url, {"inputs": TEXTS[1], "parameters": {"schema": "人物，组织机构", "position_prob": 0.3}})
    assert one.status_code == 200 and _spans(one.json()) == _spans(pipe(TEXTS[1], schema=["人物", "组织机构"],
                                                                         position_prob=0.3)[0])
    for spans in one.json().values():
        for s in spans:
            assert TEXTS[1][s["start"]:s["end"]] == s["text"]


@pytest.mark.parametrize("parameters, match", [
    ({}, "parameters.schema is missing"),
    ({"schema": [{"a": [{"b": [{"c": ["d"]}]}]}]}, r"nests 4 levels deep; a schema has at most 3 levels \(MAX_SCHEMA_DEPTH\)"),
    ({"schema": [f"t{i}" for i in range(MAX_SCHEMA_PROMPTS + 1)]}, r"at most 64 \(MAX_SCHEMA_PROMPTS\)"),
    ({"schema": ["长" * 40]}, r"parameters.schema\[0\] .* has 40 characters; a type name has at most 32 \(MAX_PROMPT_CHARS\)"),
    ({"schema": [3]}, r"parameters.schema\[0\] must be a type name"),
    ({"schema": ["人物"], "position_prob": 2}, "parameters.position_prob must be a number >= 0 and <= 0.999"),
    ({"schema": ["人物"], "top_k": 2}, "unknown parameter 'top_k'"),
])
def test_bad_schemas_and_parameters_are_422_naming_the_bound(url, parameters, match):
    r = _post(url, {"inputs": TEXTS[0], "parameters": parameters})
    assert r.status_code == 422, r.text
    assert r.json()["error"] == "Unprocessable Entity"
    import re

    assert re.search(match, r.json()["message"]), r.json()["message"]


def test_limits_auth_metrics_and_openapi_are_every_routes(url):
    assert _post(url, {"inputs": TEXTS[0], "parameters": {"schema": ["人物"]}}, token=None).status_code == 401
    assert _post(url, {"inputs": TEXTS * 3, "parameters": {"schema": ["人物"]}}).status_code == 413  # --max-inputs 4
    assert _post(url, {"inputs": "长" * 600, "parameters": {"schema": ["人物"]}}).status_code == 413
    assert _post(url, {"inputs": "  ", "parameters": {"schema": ["人物"]}}).status_code == 422
    headers = {"Authorization": b"Bearer " + TOKEN.encode("utf-8")}
    metrics = httpx.get(url + "/metrics", headers=headers, timeout=30).text
    assert 'nlp_serve_requests_total{endpoint="/predict",status="422"}' in metrics
    doc = httpx.get(url + "/openapi.json", headers=headers, timeout=30).json()
    body = doc["paths"]["/predict"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    params = body["properties"]["parameters"]["properties"]
    assert "MAX" not in params["schema"]["description"] and "at most 3 levels" in params["schema"]["description"]
    assert params["position_prob"]["maximum"] == 0.999
    info = httpx.get(url + "/info", headers=headers, timeout=30).json()
    assert info["task"] == "information-extraction"
