"""TEI's `POST /rerank` (and the text-ranking task's `/predict`) against `nlp serve` on a loopback
port, with real HTTP requests: the answer matches the pipeline, sorted best first, with
`raw_scores`, `return_text` and `truncate`; the limits (413 / 422 / 429 with TEI's error shape),
the bearer token, the metrics and the OpenAPI document. huggingface_hub's InferenceClient has no
rerank call (checked in the test), so the route is called by hand, in TEI's shape."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import httpx
import huggingface_hub as hub
import pytest
import torch

import nlp
from nlp.deploy.server_config import ServeConfig
from nlp.tasks.ranking import ErnieForTextRanking

from cli_server import cli_server, nlp_env
from tasks._task_fixtures import save_as_fine_tuned

sys.path.insert(0, str(Path(__file__).parent))
import _serve_fixtures as fx  # noqa: E402

ASSET = Path(nlp.__file__).parent / "assets" / "ernie-tiny-zh"
TOKEN = "rerank-token"
QUERY = "北京的天气怎么样"
TEXTS = ["北京今天晴，气温二十度。", "上海明天有大雨，出门带伞。", "北京明天多云转阴。", "广州的早茶很有名。" * 20]
SERVE = ["--precision", "fp32", "--device", "cpu", "--token", TOKEN, "--max-inputs", "8", "--max-text-chars", "200"]


@pytest.fixture(scope="module")
def reranker(tmp_path_factory) -> Path:
    torch.manual_seed(0)
    out = tmp_path_factory.mktemp("rerank-serve") / "reranker"
    return save_as_fine_tuned(ErnieForTextRanking.from_pretrained(ASSET), out, head_std=0.5)


@pytest.fixture(scope="module")
def url(reranker):
    with cli_server(str(reranker), SERVE, env=nlp_env()) as base:
        yield base


def _auth() -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKEN}"}


def _post(url: str, route: str, body: dict, auth: bool = True) -> httpx.Response:
    return httpx.post(url + route, json=body, headers=_auth() if auth else {}, timeout=120)


def test_rerank_answers_in_teis_shape_as_the_pipeline_ranks(url, reranker):
    assert not any("rerank" in name for name in dir(hub.InferenceClient))  # no client call to test with
    local = nlp.pipeline("text-ranking", model=str(reranker))
    expected = local(QUERY, TEXTS)
    r = _post(url, "/rerank", {"query": QUERY, "texts": TEXTS})
    assert r.status_code == 200, r.text
    got = r.json()
    assert [x["index"] for x in got] == [x["index"] for x in expected]
    assert [x["score"] for x in got] == pytest.approx([x["score"] for x in expected], abs=1e-4)
    assert all(set(x) == {"index", "score"} and 0 < x["score"] < 1 for x in got)
    raw = _post(url, "/rerank", {"query": QUERY, "texts": TEXTS, "raw_scores": True, "return_text": True}).json()
    assert [x["score"] for x in raw] == pytest.approx([x["score"] for x in local(QUERY, TEXTS, raw_scores=True)],
                                                      abs=1e-4)
    assert [x["text"] for x in raw] == [TEXTS[x["index"]] for x in raw]
    first = _post(url, "/rerank", {"query": QUERY, "texts": TEXTS, "truncate": True, "raw_scores": True}).json()
    want = local.score_pairs([(QUERY, t) for t in TEXTS], truncate=True)
    assert {x["index"]: x["score"] for x in first} == pytest.approx(dict(enumerate(want)), abs=1e-4)
    # /predict: the same ranking in our usual body, one list per input
    p = _post(url, "/predict", {"inputs": [{"query": QUERY, "passages": TEXTS}, {"query": "早茶", "passages": TEXTS[:2]}],
                                "parameters": {"top_k": 2, "return_text": True}})
    assert p.status_code == 200, p.text
    assert [x["index"] for x in p.json()[0]] == [x["index"] for x in expected[:2]] and len(p.json()[1]) == 2
    assert all(x["text"] == TEXTS[x["index"]] for x in p.json()[0])


@pytest.mark.parametrize("body, status, match", [
    ({"query": QUERY, "texts": ["好"] * 9}, 413, "at most 8"),
    ({"query": QUERY, "texts": ["好" * 201]}, 413, "at most 200"),
    ({"query": "好" * 201, "texts": ["好"]}, 413, "at most 200"),
    ({"texts": ["好"]}, 422, "lacks \"query\""),
    ({"query": QUERY}, 422, "lacks \"texts\""),
    ({"query": QUERY, "texts": "好"}, 422, "must be a list of strings"),
    ({"query": QUERY, "texts": []}, 422, "empty list"),
    ({"query": QUERY, "texts": ["好", 3]}, 422, "texts[1] must be a string"),
    ({"query": QUERY, "texts": ["好", " "]}, 422, "texts[1] is empty"),
    ({"query": QUERY, "texts": ["\u200b"]}, 422, "texts[0] has no tokens"),
    ({"query": QUERY, "texts": ["好"], "raw_scores": "yes"}, 422, "`raw_scores` must be true or false"),
    ({"query": QUERY, "texts": ["好"], "return_txt": True}, 422, "Did you mean 'return_text'"),
    ({"query": QUERY, "texts": ["好"], "truncation_direction": "Left"}, 422, "truncation_direction"),
])
def test_rerank_refuses_bad_requests_in_teis_error_shape(url, body, status, match):
    r = _post(url, "/rerank", body)
    assert r.status_code == status and match in r.json()["error"], r.text
    assert r.json()["error_type"] == "Validation"


def test_rerank_needs_the_token_and_is_counted_and_documented(url):
    assert _post(url, "/rerank", {"query": QUERY, "texts": ["好"]}, auth=False).status_code == 401
    assert _post(url, "/rerank", {"query": QUERY, "texts": ["好"]}).status_code == 200
    assert _post(url, "/rerank", {"query": QUERY, "texts": ["好"] * 9}).status_code == 413  # this test's own
    metrics = httpx.get(url + "/metrics", headers=_auth(), timeout=60).text
    assert 'endpoint="/rerank",status="200"' in metrics and 'endpoint="/rerank",status="413"' in metrics
    doc = httpx.get(url + "/openapi.json", timeout=60).json()
    op = doc["paths"]["/rerank"]["post"]
    schema = op["requestBody"]["content"]["application/json"]["schema"]
    assert schema["required"] == ["query", "texts"] and set(schema["properties"]) >= {"raw_scores", "return_text",
                                                                                        "truncate"}
    assert op["security"] == [{"bearer": []}]
    assert "/predict" in doc["paths"]


def test_a_full_queue_answers_429_on_rerank(reranker):
    """max_queue=2 with a long batch wait: of six one-text requests sent at once two are queued and
    four refused with 429, Retry-After and TEI's "Overloaded"."""
    config = ServeConfig(model=str(reranker), precision="fp32", max_queue=2, max_inputs=2, max_batch_wait_ms=3000)
    with fx.running(config) as base:
        async def send_all():
            async with httpx.AsyncClient(base_url=base, timeout=60) as client:
                return await asyncio.gather(*(client.post("/rerank", json={"query": QUERY, "texts": [t]})
                                              for t in TEXTS[:3] * 2))

        answers = asyncio.run(send_all())
        assert sorted(r.status_code for r in answers) == [200, 200, 429, 429, 429, 429]
        refused = [r for r in answers if r.status_code == 429]
        assert all(r.json()["error_type"] == "Overloaded" and int(r.headers["Retry-After"]) >= 1 for r in refused)
