"""The routes other people's clients call, called by those clients against `nlp serve` (a real
server process on a loopback port): OpenAI's Python client on `/v1/embeddings`, huggingface_hub's
`InferenceClient` on an endpoint URL (feature_extraction, sentence_similarity,
text_classification, token_classification), and TEI's `/tokenize` and `/decode`; each under the
bearer token, the limits, the metrics and in the OpenAPI document."""

from __future__ import annotations

import asyncio
import base64
import sys
from pathlib import Path

import httpx
import huggingface_hub as hub
import numpy as np
import openai
import pytest

import nlp
from nlp.tokenizer import load_tokenizer

from cli_server import cli_server, nlp_env
from nlp.deploy.server_config import ServeConfig

sys.path.insert(0, str(Path(__file__).parent))
import _serve_fixtures as fx  # noqa: E402

ASSETS = Path(nlp.__file__).parent / "assets"
TOKEN = "client-routes-token"
TEXTS = ["这家餐厅的服务非常好，菜也好吃", "张三在北京大学工作。", "股市今天大跌"]
SERVE = ["--precision", "fp32", "--device", "cpu", "--token", TOKEN, "--max-inputs", "8", "--max-text-chars", "200"]


@pytest.fixture(scope="module")
def embedding_url(embedding_model):
    with cli_server(str(embedding_model), SERVE, env=nlp_env()) as url:
        yield url


@pytest.fixture(scope="module")
def local(embedding_model):
    return nlp.pipeline("feature-extraction", model=str(embedding_model))


def _auth() -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKEN}"}


# ------------------------------------------------------------ OpenAI's client: /v1/embeddings

def test_openai_client_embeddings_match_the_pipeline(embedding_url, local, embedding_model):
    client = openai.OpenAI(base_url=embedding_url + "/v1", api_key=TOKEN, max_retries=0)
    expected = np.asarray(local(TEXTS))
    # the client asks for base64 unless told otherwise, and decodes it itself
    got = client.embeddings.create(model="ernie-tiny-embedding", input=TEXTS)
    assert got.object == "list" and got.model == "ernie-tiny-embedding"
    assert [d.index for d in got.data] == [0, 1, 2] and all(d.object == "embedding" for d in got.data)
    np.testing.assert_allclose(np.asarray([d.embedding for d in got.data]), expected, atol=1e-5)
    tok = load_tokenizer(embedding_model)
    tokens = sum(len(ids) for ids in tok(TEXTS)["input_ids"])
    assert got.usage.prompt_tokens == got.usage.total_tokens == tokens

    one = client.embeddings.create(model="m", input=TEXTS[0], encoding_format="float")
    assert len(one.data) == 1
    np.testing.assert_allclose(one.data[0].embedding, expected[0], atol=1e-5)

    short = client.embeddings.create(model="m", input=TEXTS, dimensions=64, encoding_format="float")
    cut = expected[:, :64] / np.linalg.norm(expected[:, :64], axis=1, keepdims=True)
    np.testing.assert_allclose(np.asarray([d.embedding for d in short.data]), cut, atol=1e-5)
    assert all(len(d.embedding) == 64 for d in short.data)

    # token ids of the model's vocabulary: one sequence, or several
    ids = [tok(t, add_special_tokens=False)["input_ids"] for t in TEXTS[:2]]
    decoded = [tok.decode(i, skip_special_tokens=True) for i in ids]
    by_ids = client.embeddings.create(model="m", input=ids, encoding_format="float")
    np.testing.assert_allclose(np.asarray([d.embedding for d in by_ids.data]), np.asarray(local(decoded)), atol=1e-5)
    single = client.embeddings.create(model="m", input=ids[0], encoding_format="float")
    np.testing.assert_allclose(single.data[0].embedding, local(decoded[0]), atol=1e-5)


def test_openai_base64_is_little_endian_float32(embedding_url, local):
    r = httpx.post(embedding_url + "/v1/embeddings", headers=_auth(), timeout=60,
                   json={"model": "m", "input": TEXTS[1], "encoding_format": "base64"})
    assert r.status_code == 200, r.text
    raw = base64.b64decode(r.json()["data"][0]["embedding"])
    np.testing.assert_allclose(np.frombuffer(raw, dtype="<f4"), local(TEXTS[1]), atol=1e-5)


@pytest.mark.parametrize("kwargs, status, match", [
    ({"input": "\u200b"}, 422, "no tokens"),                   # a text with no tokens
    ({"input": " "}, 422, "empty"),
    ({"input": TEXTS, "dimensions": 100_000}, 422, "dimensions"),
    ({"input": [[0, 10**9]]}, 422, "not a token id of this model"),
    ({"input": ["好"] * 9}, 413, "at most 8"),
    ({"input": "好" * 201}, 413, "at most 200"),
])
def test_openai_client_raises_on_refused_requests(embedding_url, kwargs, status, match):
    client = openai.OpenAI(base_url=embedding_url + "/v1", api_key=TOKEN, max_retries=0)
    with pytest.raises(openai.APIStatusError) as err:
        client.embeddings.create(model="m", encoding_format="float", **kwargs)
    assert err.value.status_code == status
    assert match in err.value.message
    body = err.value.response.json()  # OpenAI's error shape
    assert set(body) == {"error"} and set(body["error"]) == {"message", "type", "param", "code"}
    assert body["error"]["type"] == "invalid_request_error"


def test_openai_client_with_a_wrong_key_is_refused_in_openai_shape(embedding_url):
    client = openai.OpenAI(base_url=embedding_url + "/v1", api_key="wrong", max_retries=0)
    with pytest.raises(openai.AuthenticationError) as err:
        client.embeddings.create(model="m", input="好")
    assert err.value.status_code == 401
    assert err.value.response.json()["error"]["type"] == "authentication_error"
    assert "bearer token" in err.value.message


# ------------------------------------------------------------ huggingface_hub's InferenceClient

def test_inference_client_feature_extraction_and_sentence_similarity(embedding_url, local):
    client = hub.InferenceClient(base_url=embedding_url, token=TOKEN)
    vectors = client.feature_extraction(TEXTS[0])
    np.testing.assert_allclose(np.asarray(vectors).reshape(-1), local(TEXTS[0]), atol=1e-5)
    raw = client.feature_extraction(TEXTS[0], normalize=False, truncate=True, truncation_direction="right")
    np.testing.assert_allclose(np.asarray(raw).reshape(-1), local(TEXTS[0], normalize=False, truncate=True),
                               rtol=1e-4, atol=1e-4)
    scores = client.sentence_similarity(TEXTS[0], other_sentences=TEXTS)
    assert len(scores) == 3 and scores[0] == pytest.approx(1.0, abs=1e-4)
    expected = np.asarray(local(TEXTS)) @ np.asarray(local(TEXTS[0]))
    np.testing.assert_allclose(scores, expected, atol=1e-4)
    with pytest.raises(hub.errors.HfHubHTTPError) as err:
        client.feature_extraction("好", truncation_direction="left")
    assert err.value.response.status_code == 422
    with pytest.raises(hub.errors.HfHubHTTPError) as err:
        hub.InferenceClient(base_url=embedding_url, token="wrong").feature_extraction("好")
    assert err.value.response.status_code == 401


def test_inference_client_text_classification():
    model = ASSETS / "ernie-tiny-zh-sentiment-small"
    local = nlp.pipeline("text-classification", model=str(model))
    with cli_server(str(model), SERVE, env=nlp_env()) as url:
        client = hub.InferenceClient(model=url, token=TOKEN)
        best = client.text_classification(TEXTS[0])
        want = local(TEXTS[0], top_k=None)
        assert len(best) == 1 and best[0].label == want[0]["label"]
        assert best[0].score == pytest.approx(want[0]["score"], abs=1e-5)
        every = client.text_classification(TEXTS[0], top_k=len(want))
        assert [(e.label, pytest.approx(e.score, abs=1e-5)) for e in every] == \
            [(w["label"], w["score"]) for w in want]
        _check_tokenize_and_decode(url, model)
        _check_openapi_and_metrics(url, ["/", "/predict", "/tokenize", "/decode"])


def test_inference_client_token_classification():
    model = ASSETS / "ernie-tiny-zh-ner"
    local = nlp.pipeline("token-classification", model=str(model), precision="fp32")  # as SERVE runs it
    text = "张三在北京大学工作，李四去了上海。"
    with cli_server(str(model), SERVE, env=nlp_env()) as url:
        entities = hub.InferenceClient(base_url=url, token=TOKEN).token_classification(text)
        want = local(text)
        assert want, "the shipped NER model finds entities in this text"
        assert [(e.entity_group, e.word, e.start, e.end) for e in entities] == \
            [(w["type"], w["text"], w["start"], w["end"]) for w in want]
        assert all(text[e.start:e.end] == e.word for e in entities)
        assert [e.score for e in entities] == pytest.approx([w["score"] for w in want], abs=1e-5)


# ------------------------------------------------------------ TEI's /tokenize and /decode

def _check_tokenize_and_decode(url: str, model: Path) -> None:
    tok = load_tokenizer(model)
    text = "  ＡＢＣ公司的iPhone很好用"
    r = httpx.post(url + "/tokenize", json={"inputs": text}, headers=_auth(), timeout=60)
    assert r.status_code == 200, r.text
    [tokens] = r.json()
    assert [t["id"] for t in tokens] == tok(text)["input_ids"]
    assert tokens[0]["special"] and tokens[-1]["special"] and tokens[0]["start"] is None
    for t in tokens[1:-1]:
        assert not t["special"] and text[t["start"]:t["stop"]] == t["text"] and t["text"].strip()
    plain = httpx.post(url + "/tokenize", json={"inputs": [text, "好"], "add_special_tokens": False},
                       headers=_auth(), timeout=60).json()
    assert [t["id"] for t in plain[0]] == [t["id"] for t in tokens[1:-1]] and len(plain) == 2
    ids = [t["id"] for t in tokens]
    r = httpx.post(url + "/decode", json={"ids": ids}, headers=_auth(), timeout=60)
    assert r.status_code == 200 and r.json() == [tok.decode(ids, skip_special_tokens=True)]
    both = httpx.post(url + "/decode", json={"ids": [ids, ids[:3]], "skip_special_tokens": False},
                      headers=_auth(), timeout=60).json()
    assert both == [tok.decode(ids), tok.decode(ids[:3])]
    for route, body, status, match in (("/decode", {"ids": [len(tok)]}, 422, "token id"),
                                       ("/decode", {"ids": "1 2"}, 422, "list of token ids"),
                                       ("/decode", {"ids": [[1]] * 9}, 413, "at most 8"),
                                       ("/tokenize", {"inputs": "好" * 201}, 413, "at most 200"),
                                       ("/tokenize", {"inputs": "好", "add_special_tokens": 1}, 422, "true or false"),
                                       ("/tokenize", {"text": "好"}, 422, "unknown field 'text'")):
        bad = httpx.post(url + route, json=body, headers=_auth(), timeout=60)
        assert bad.status_code == status and match in bad.json()["error"], (route, body, bad.text)
        assert bad.json()["error_type"] == "Validation"
    assert httpx.post(url + "/tokenize", json={"inputs": "好"}, timeout=60).status_code == 401


def _check_openapi_and_metrics(url: str, routes: list[str]) -> None:
    doc = httpx.get(url + "/openapi.json", timeout=60).json()
    for route in routes:
        op = doc["paths"][route]["post"]
        assert op["requestBody"]["content"]["application/json"]["schema"]["properties"]
        assert op["security"] == [{"bearer": []}]
    metrics = httpx.get(url + "/metrics", headers=_auth(), timeout=60).text
    for route in ("/", "/tokenize", "/decode"):
        assert f'endpoint="{route}",status="200"' in metrics, route
    assert httpx.get(url + "/", timeout=60).status_code == 200  # the playground's page is still GET /


def test_the_embedding_server_tokenizes_documents_and_counts_its_client_routes(embedding_url, embedding_model):
    _check_tokenize_and_decode(embedding_url, embedding_model)
    r = httpx.post(embedding_url + "/", json={"inputs": "好"}, headers=_auth(), timeout=60)
    assert r.status_code == 200 and len(r.json()) == 1
    r = httpx.post(embedding_url + "/v1/embeddings", json={"model": "m", "input": "好"}, headers=_auth(), timeout=60)
    assert r.status_code == 200 and len(r.json()["data"][0]["embedding"]) == 256, r.text
    _check_openapi_and_metrics(embedding_url, ["/", "/v1/embeddings", "/tokenize", "/decode", "/embed"])
    doc = httpx.get(embedding_url + "/openapi.json", timeout=60).json()
    err = doc["paths"]["/v1/embeddings"]["post"]["responses"]["422"]["content"]["application/json"]["schema"]
    assert "error" in err["properties"] and err["properties"]["error"]["type"] == "object"
    metrics = httpx.get(embedding_url + "/metrics", headers=_auth(), timeout=60).text
    assert 'endpoint="/v1/embeddings",status="200"' in metrics


def test_a_full_queue_answers_429_on_the_client_routes_in_their_shapes(embedding_model):
    """max_queue=2 with a long batch wait: of six requests sent at once two are queued, four are
    refused with 429 and Retry-After, which OpenAI's client raises as RateLimitError."""
    config = ServeConfig(model=str(embedding_model), precision="fp32", max_queue=2, max_inputs=2,
                         max_batch_wait_ms=3000)
    with fx.running(config) as url:
        async def openai_all():
            client = openai.AsyncOpenAI(base_url=url + "/v1", api_key="unused", max_retries=0)
            return await asyncio.gather(*(client.embeddings.create(model="m", input=t) for t in TEXTS * 2),
                                        return_exceptions=True)

        async def tokenize_all():
            async with httpx.AsyncClient(base_url=url, timeout=60) as client:
                return await asyncio.gather(*(client.post("/tokenize", json={"inputs": t}) for t in TEXTS * 2))

        answers = asyncio.run(openai_all())
        refused = [a for a in answers if isinstance(a, Exception)]
        assert len(refused) == 4 and all(isinstance(a, openai.RateLimitError) for a in refused), answers
        assert all(a.response.json()["error"]["type"] == "rate_limit_error" for a in refused)
        assert all(int(a.response.headers["Retry-After"]) >= 1 for a in refused)
        tokenized = asyncio.run(tokenize_all())
        assert sorted(r.status_code for r in tokenized) == [200, 200, 429, 429, 429, 429]
        assert all(r.json()["error_type"] == "Overloaded" for r in tokenized if r.status_code == 429)
