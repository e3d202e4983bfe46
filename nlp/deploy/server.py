"""The model server behind `nlp serve`: one task's pipeline over HTTP, with dynamic batching.

    config = ServeConfig(model="runs/sentiment-reviews", port=8000)
    run_server(config)                     # uvicorn; returns after SIGTERM has drained it
    app = create_app(config)               # the ASGI app itself (tests, other ASGI servers)

Endpoints (docs/serving.md): POST /predict, GET /health, GET /info, GET /metrics (Prometheus
text), GET /openapi.json, the playground page at GET / and the API docs at GET /docs
(nlp/deploy/server_pages.py; off with `playground=False`), and any POST route the task's spec adds (`TaskSpec.serving_routes()`,
e.g. TEI's /embed), served like /predict: same batching, limits, metrics and auth. Every error
is JSON {"error", "message"} (a route's adapter may give its own shape, `error_body`) with a
status that says what to do: 401 (bearer token), 404 / 405, 408 (too slow), 413 (too large),
422 (malformed), 429 (queue full, with Retry-After), 503 (loading or shutting down); the protocol
layer's 400 / 408 / 414 / 431 too (nlp/deploy/server_http.py).

SIGTERM drains within --drain-timeout: what is queued runs until shortly before the deadline,
the rest is answered 503 with Retry-After, and a running batch is abandoned between two forward
passes (_StoppableBackend), so the process exits 0 with the batch worker idle.

The model loads in a background thread after the server starts listening, then runs one warm-up
batch of the largest shape the token budget allows; /health answers 503 until both are done.
Requests are parsed on the event loop, queued with their token cost, and batched by one worker
thread (nlp/deploy/batching.py) that runs the pipeline, so the event loop stays responsive while
the model computes. With `workers > 1`, uvicorn starts that many
processes on the one port, each with its own model, queue and metrics.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import hmac
import json
import logging
import math
import os
import signal
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, fields
from http import HTTPStatus
from typing import Any

from nlp._extras import MissingExtraError

try:
    from starlette.applications import Starlette
    from starlette.exceptions import HTTPException
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Route
except ImportError as err:  # the serve extra
    raise MissingExtraError(err.name or "starlette", "the model server (`nlp serve`)", extra="serve") from err

from nlp._common import ConfigError, DataError
from nlp.deploy.batching import BatchStats, DynamicBatcher, Job, QueueFull, ShuttingDown
from nlp.deploy.heap import HeapTrimmer
from nlp.deploy.metrics import CONTENT_TYPE, ServerMetrics
from nlp.deploy.server_config import ServeConfig
from nlp.deploy.server_model import ServingModel, load_pipeline_for_serving, warm_up_shapes
from nlp.deploy.server_openapi import openapi_document
from nlp.deploy.server_pages import PAGE_ROUTES, page_routes
from nlp.deploy.server_tasks import Limits, RequestError, adapter_for, routes_for, split_outputs

__all__ = ["CONFIG_ENV", "ServeConfig", "app_from_environment", "bind_sockets", "create_app", "run_server"]

logger = logging.getLogger(__name__)

CONFIG_ENV = "NLP_SERVE_CONFIG"  # how `--workers N` hands the settings to each worker process
_ROUTES = ("/predict", "/health", "/info", "/metrics", "/openapi.json")  # and the task's own POST routes
_PROTECTED = ("/predict", "/info", "/metrics")  # /health and /openapi.json stay open for probes
CPU_PASSES_PER_BATCH = 4  # a batch's windows, sorted by length, run as passes of a quarter of the budget
# a drain stops running batches this long before --drain-timeout ends (at most a quarter of it),
# so that the pass running then finishes and every request is answered before the deadline
DRAIN_MARGIN_S = 1.0


def _error(status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": HTTPStatus(status).phrase, "message": message}, status_code=status,
                        headers=headers)


class _StoppableBackend:
    """The served pipeline's backend, with a check before each forward pass: once a drain's
    cutoff has passed, the running batch is abandoned (ShuttingDown) between two passes, so the
    batch worker is idle, and no native code runs in it, when the process exits."""

    def __init__(self, backend: Any, past_cutoff: Callable[[], bool]) -> None:
        self._backend = backend
        self._past_cutoff = past_cutoff

    def __getattr__(self, name: str) -> Any:  # config, decoding, ...: the backend's own
        return getattr(self._backend, name)

    def __call__(self, batch: Any) -> Any:
        if self._past_cutoff():
            raise ShuttingDown("the server is shutting down; its drain timeout passed while this request ran")
        return self._backend(batch)


class _ModelServer:
    """The state behind the routes: the served model, its batcher, the metrics."""

    def __init__(self, config: ServeConfig, loader: Callable[[ServeConfig], ServingModel]) -> None:
        self.config = config
        self.loader = loader
        self.metrics = ServerMetrics()
        self.limits = Limits(config.max_inputs, config.max_text_chars)
        self.token = config.token.encode("utf-8") if config.token is not None else None
        self.served: ServingModel | None = None  # set last: its presence means ready
        self.batcher: DynamicBatcher | None = None
        self.heap = HeapTrimmer(every_s=2.0)
        self.load_error: str | None = None
        self.stopping = False
        self.drain_deadline: float | None = None  # monotonic time the drain must end by
        from nlp import __version__

        self.version = __version__
        self.routes = _ROUTES  # set by create_app: with the task's own POST routes
        self.task: str | None = None  # set by create_app: the task the model will be served as

    # ------------------------------------------------------------ loading and the worker

    def load(self) -> None:
        try:
            served = self.loader(self.config)
            self._warm_up(served)
            batcher = DynamicBatcher(self._run_batch, max_batch_tokens=self.config.max_batch_tokens,
                                     max_wait_s=self.config.max_batch_wait_ms / 1000, max_queue=self.config.max_queue,
                                     max_batch_requests=self.config.max_batch_requests, on_batch=self._on_batch,
                                     on_idle=self.heap.trim)
            batcher.start()
            served.pipeline.backend = _StoppableBackend(served.pipeline.backend, batcher.past_cutoff)
            self.batcher = batcher
            if self.stopping:  # SIGTERM came during loading
                batcher.begin_stop(self._cutoff())
            self.served = served
            logger.info("model ready: %s (%s, %s %s)", self.config.model_name, served.task, served.backend,
                        served.precision)
        except Exception as err:  # noqa: BLE001 - /info reports it; /health says that it failed
            self.load_error = f"{type(err).__name__}: {err}"
            if os.path.isabs(self.config.model) and self.config.model_name != self.config.model:
                # a hub name's snapshot in the cache is an internal: the error says the name
                self.load_error = self.load_error.replace(self.config.model, self.config.model_name)
            logger.error("could not load the model: %s", self.load_error)

    def _warm_up(self, served: ServingModel) -> None:
        """Batches of every shape kind the server will run (server_model.warm_up_shapes: the
        largest batch, every padded length, every GEMM row bucket), before the server reports
        ready: kernels are compiled and the allocator reaches its high-water mark before the
        first request, so neither happens under load, nor grows resident memory then. A model
        that cannot run the largest batch fails to load (/health says why) instead of failing
        requests later."""
        adapter = adapter_for(served.task)
        shapes = warm_up_shapes(served.pipeline, self.config.max_batch_tokens)
        start = time.perf_counter()
        for rows, tokens in shapes:
            served.pipeline.batch_size = rows
            adapter.run(served, adapter.warm_up_items(tokens, rows), adapter.call_key({}))
        logger.info("warm-up: %d batches (%d windows of %d tokens first) in %.2f s", len(shapes), shapes[0][0],
                    shapes[0][1], time.perf_counter() - start)

    def _run_batch(self, key: Any, jobs: list[Job]) -> list[list[Any]]:
        served = self.served
        assert served is not None  # jobs are only queued once the model is loaded
        path, key = key  # a job's key is (its route, the pipeline call's key)
        items = [x for job in jobs for x in job.items]
        rows = sum(job.rows for job in jobs)
        longest = max(job.row_tokens for job in jobs)
        # the pipeline sorts the windows by length and runs them in forward passes of rows of like
        # length. On CPU a pass is a quarter of the budget: less padding than one pass padded to
        # the longest, and ~1,000-token passes keep the GEMMs efficient (ernie-3.0-mini, 64
        # clients: +4% requests/s over one pass; an eighth of the budget was 16% slower). A GPU
        # runs the batch in one pass, as budget-sized chunks when one request alone is larger.
        passes = CPU_PASSES_PER_BATCH if served.device == "cpu" else 1
        served.pipeline.batch_size = max(1, min(rows, self.config.max_batch_tokens // passes // longest))
        if not served.rows_independent:  # dynamic int8: one activation scale per pass, so one row a pass
            served.pipeline.batch_size = 1
        outputs = routes_for(served.task)[path].run(served, items, key)
        return split_outputs(outputs, [len(job.items) for job in jobs])

    def _on_batch(self, stats: BatchStats) -> None:
        self.metrics.observe_batch(stats.requests, stats.inputs, stats.padded_tokens, stats.seconds)
        self.heap.maybe_trim()  # the batch worker, between batches

    # ------------------------------------------------------------ checks shared by routes

    def authorized(self, request: Request) -> bool:
        if self.token is None:
            return True
        # the raw header bytes: a UTF-8 token arrives as its bytes, whatever the characters
        for name, value in request.scope["headers"]:
            if name == b"authorization":
                scheme, _, credentials = value.strip().partition(b" ")
                if scheme.lower() == b"bearer":
                    return hmac.compare_digest(credentials.strip(), self.token)
        return False

    def guard(self, request: Request) -> Response | None:
        if not self.authorized(request):
            return _error(401, "missing or wrong bearer token: send the header `Authorization: Bearer TOKEN` "
                               "with the token the server was started with (--token)",
                          headers={"WWW-Authenticate": 'Bearer realm="nlp serve"'})
        return None

    def not_ready(self) -> Response | None:
        if self.stopping:
            return _error(503, "the server is shutting down", headers={"Retry-After": "1"})
        if self.served is None:
            if self.load_error:  # the details (paths, digests) go to the log and the token-guarded /info
                return _error(503, "the model failed to load; the server's log (and /info) say why. Fix the "
                                   "model and restart the server")
            return _error(503, "the model is loading; retry shortly", headers={"Retry-After": "1"})
        return None

    # ------------------------------------------------------------ draining

    def _cutoff(self) -> float:
        """When running batches stop: DRAIN_MARGIN_S (at most a quarter of it) before the deadline."""
        assert self.drain_deadline is not None
        return self.drain_deadline - min(DRAIN_MARGIN_S, self.config.drain_timeout / 4)

    def begin_drain(self) -> None:
        """SIGTERM: refuse new requests (503), run the queued ones until shortly before
        --drain-timeout ends, answer the rest 503 with Retry-After. Idempotent."""
        if self.drain_deadline is None:
            self.drain_deadline = time.monotonic() + self.config.drain_timeout
        self.stopping = True
        if self.batcher is not None:
            self.batcher.begin_stop(self._cutoff())

    def _chain_signals(self) -> None:
        """Start the drain when SIGTERM / SIGINT arrive, before uvicorn's own handler (installed
        when it started serving; it stops accepting and waits for the requests in flight)."""
        if threading.current_thread() is not threading.main_thread():
            return  # an in-thread server (tests): its owner calls begin_drain
        for sig in (signal.SIGTERM, signal.SIGINT):
            previous = signal.getsignal(sig)
            if not callable(previous):
                continue

            def handler(signum: int, frame: Any, previous: Callable = previous) -> None:
                self.begin_drain()
                previous(signum, frame)

            signal.signal(sig, handler)

    # ------------------------------------------------------------ routes

    async def predict(self, request: Request) -> Response:
        """POST /predict, and every POST route of the task's spec: the route's adapter parses
        the body, the batcher runs it, the adapter shapes the answer (and its errors)."""
        path = request.url.path
        if (refused := self.guard(request) or self.not_ready()) is not None:
            return self._in_route_shape(refused, path)
        served, batcher = self.served, self.batcher
        assert served is not None and batcher is not None
        adapter = routes_for(served.task).get(path)
        if adapter is None:
            return _error(404, f"{served.task} models have no route POST {path}; routes: {', '.join(self.routes)}")

        def error(status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
            return JSONResponse(adapter.error_body(status, message), status_code=status, headers=headers)

        body = await self._read_body(request, error)
        if isinstance(body, Response):
            return body
        try:
            payload = json.loads(body)
        except ValueError as err:  # JSONDecodeError, or bytes that are not UTF-8
            return error(422, f"the body is not valid JSON: {err}. Send {{\"inputs\": ..., \"parameters\": {{...}}}}")
        except RecursionError:
            return error(422, _NESTED_TOO_DEEPLY)
        try:
            return await self._answer(payload, served, batcher, adapter, path, error)
        except RecursionError:  # a structure nested just under the parser's limit, met by a check
            return error(422, _NESTED_TOO_DEEPLY)

    def _in_route_shape(self, refused: Response, path: str) -> Response:
        """A refusal before the body is read (401, 503), in the error shape of the route's clients."""
        adapter = routes_for(self.task).get(path) if self.task is not None else None
        if adapter is None or not isinstance(refused, JSONResponse):
            return refused
        message = json.loads(refused.body).get("message", "")
        headers = {k: v for k, v in refused.headers.items() if k.lower() not in ("content-length", "content-type")}
        return JSONResponse(adapter.error_body(refused.status_code, message), status_code=refused.status_code,
                            headers=headers)

    async def _read_body(self, request: Request, error: Callable[..., Response]) -> bytes | Response:
        """The body, or the error to answer: 413 past max_body_bytes (from Content-Length before
        reading), 408 when it is not all there within body_timeout, 503 when a drain begins."""
        limit = self.config.max_body_bytes
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            return error(413, f"the request body ({declared} bytes) is over {limit} bytes; send fewer or shorter "
                               "inputs per request", headers={"Connection": "close"})
        body = bytearray()
        deadline = time.monotonic() + self.config.body_timeout
        while True:
            left = deadline - time.monotonic()
            if self.stopping:
                return error(503, "the server is shutting down", headers={"Retry-After": "1", "Connection": "close"})
            if left <= 0:
                return error(408, f"the request body did not arrive within {self.config.body_timeout:g} s "
                                   f"(--body-timeout; {len(body)} bytes came); send it at once",
                              headers={"Connection": "close"})
            try:  # in slices, to notice a drain; cancelling uvicorn's receive() loses nothing
                message = await asyncio.wait_for(request.receive(), min(left, 0.25))
            except asyncio.TimeoutError:
                continue
            if message["type"] == "http.disconnect":
                return Response(status_code=499)  # nobody is listening any more; never sent
            body += message.get("body", b"")
            if len(body) > limit:
                return error(413, f"the request body is over {limit} bytes; send fewer or shorter inputs per "
                                   "request", headers={"Connection": "close"})
            if not message.get("more_body", False):
                return bytes(body)

    async def _answer(self, payload: Any, served: ServingModel, batcher: DynamicBatcher, adapter: Any, path: str,
                      error: Callable[..., Response]) -> Response:
        if not isinstance(payload, dict):
            return error(422, "the body must be a JSON object {\"inputs\": ..., \"parameters\": {...}}, "
                              f"got a JSON {type(payload).__name__}")
        try:
            parsed = adapter.parse_body(payload, served, self.limits)
        except RequestError as err:
            return error(err.status, err.message)
        if parsed.rows > self.config.max_request_windows:  # what one request may hold the worker for
            return error(413, f"this request makes {parsed.rows} windows of up to {served.max_length} tokens; this "
                              f"server runs at most {self.config.max_request_windows} per request "
                              "(--max-request-windows). Send fewer or shorter texts per request.")
        job = Job(parsed.items, key=(path, parsed.key), rows=parsed.rows, row_tokens=parsed.row_tokens)
        try:
            future = batcher.submit(job)
        except QueueFull as err:
            return error(429, f"the server is busy ({err}); retry after the Retry-After seconds",
                         headers={"Retry-After": str(self._retry_after())})
        except ShuttingDown as err:
            return error(503, str(err), headers={"Retry-After": "1"})
        try:
            outputs = await asyncio.wrap_future(future)
        except ShuttingDown as err:
            return error(503, f"{err}; retry on another instance", headers={"Retry-After": "1"})
        except DataError as err:
            return error(422, str(err))
        except Exception as err:  # noqa: BLE001 - a JSON 500, never a traceback to the client
            logger.exception("prediction failed")
            return error(500, f"the model failed on this request: {type(err).__name__}: {err}")
        shaped = [adapter.shape(o, parsed.params) for o in outputs]
        return JSONResponse(adapter.respond(shaped, parsed))

    def _retry_after(self) -> int:
        """Seconds until the queue has likely drained: queued inputs over the recent pace."""
        m = self.metrics.forward_seconds
        if not m.count or not self.metrics.inputs_total or self.batcher is None:
            return 1
        inputs_per_s = self.metrics.inputs_total / max(m.sum, 1e-9)
        return max(1, min(60, math.ceil(self.batcher.depth / inputs_per_s)))

    async def health(self, request: Request) -> Response:
        if (refused := self.not_ready()) is not None:
            return refused
        return JSONResponse({"status": "ok"})

    async def info(self, request: Request) -> Response:
        if (refused := self.guard(request)) is not None:
            return refused
        s, c = self.served, self.config
        return JSONResponse({
            "status": "ok" if s is not None else ("error" if self.load_error else "loading"),
            **({"error": self.load_error} if self.load_error else {}),
            "task": s.task if s else None, "labels": s.labels if s else None,
            "model": c.model_name, "backend": s.backend if s else None,  # as the user named it
            "precision": s.precision if s else None, "device": s.device if s else None,
            "max_length": s.max_length if s else None, "version": self.version,
            "batching": {"max_batch_tokens": c.max_batch_tokens, "max_batch_wait_ms": c.max_batch_wait_ms,
                         "max_batch_requests": c.max_batch_requests, "max_queue": c.max_queue},
            "limits": {"max_inputs": c.max_inputs, "max_text_chars": c.max_text_chars,
                       "max_request_windows": c.max_request_windows},
        })

    async def metrics_text(self, request: Request) -> Response:
        if (refused := self.guard(request)) is not None:
            return refused
        depth = self.batcher.depth if self.batcher is not None else 0
        text = self.metrics.render(queue_depth=depth, queue_capacity=self.config.max_queue,
                                   ready=self.served is not None)
        return Response(text, media_type=CONTENT_TYPE)

    async def openapi(self, request: Request) -> Response:
        task = self.served.task if self.served else _task_of(self.config)
        if task is None:  # /openapi.json needs no token: the load error's details stay in the log and /info
            refused = self.not_ready()
            return refused if refused is not None else _error(503, "the model is loading; retry shortly",
                                                              headers={"Retry-After": "1"})
        return JSONResponse(openapi_document(task, version=self.version, auth=self.token is not None))

    # ------------------------------------------------------------ errors and lifecycle

    async def http_error(self, request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        if exc.status_code == 404:
            return _error(404, f"no route {request.method} {request.url.path}; routes: {', '.join(self.routes)}")
        if exc.status_code == 405:
            return _error(405, f"{request.method} is not allowed on {request.url.path}; use "
                               f"{exc.headers.get('Allow', 'another method') if exc.headers else 'another method'}",
                          headers=dict(exc.headers or {}))
        return _error(exc.status_code, str(exc.detail))

    async def internal_error(self, request: Request, exc: Exception) -> Response:
        return _error(500, f"internal error: {type(exc).__name__}: {exc}")

    @contextlib.asynccontextmanager
    async def lifespan(self, app: Starlette):
        # a daemon thread, not the loop's executor: a shutdown during loading must not wait for it
        threading.Thread(target=self.load, name="nlp-serve-load", daemon=True).start()
        self._chain_signals()
        try:
            yield
        finally:
            self.begin_drain()  # no-op after SIGTERM; else (an embedding server's exit) it starts now
            if self.batcher is not None:
                assert self.drain_deadline is not None
                left = max(0.0, self.drain_deadline - time.monotonic())
                if not await asyncio.to_thread(self.batcher.stop, left):
                    logger.warning("the batch worker was still in a forward pass at the drain deadline")
            logger.info("drained; stopped")


class _ObserveRequests:
    """ASGI middleware: every HTTP response's endpoint, status and latency into the metrics."""

    def __init__(self, app: Any, metrics: ServerMetrics, routes: tuple[str, ...] = _ROUTES) -> None:
        self.app = app
        self.metrics = metrics
        self.routes = routes

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = 500

        async def send_and_note(message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_and_note)
        finally:
            path = scope.get("path", "")
            self.metrics.observe_request(path if path in self.routes else "other", status, time.perf_counter() - start)


def _task_of(config: ServeConfig) -> str | None:
    """The task `config.model` will be served as (its routes are known before it loads), or
    None when that cannot be told now (the load then reports why on /health)."""
    from nlp.deploy.server_model import check_servable

    try:
        return check_servable(config.model, task=config.task)
    except Exception:  # noqa: BLE001 - a model that cannot load says why on /health
        return None


_NESTED_TOO_DEEPLY = ("the body nests arrays or objects too deeply; send {\"inputs\": ..., \"parameters\": {...}} "
                      "with texts (or question/context objects) in at most one list")


def _default_loader(config: ServeConfig) -> ServingModel:
    return load_pipeline_for_serving(config.model, task=config.task, precision=config.precision, device=config.device,
                                     name=config.model_name)


def create_app(config: ServeConfig, *, loader: Callable[[ServeConfig], ServingModel] | None = None) -> Starlette:
    """The ASGI app serving `config.model`; `loader(config)` loads it (default:
    load_pipeline_for_serving) in a background thread when the app starts."""
    server = _ModelServer(config, loader or _default_loader)
    task = server.task = _task_of(config)
    posts = list(routes_for(task)) if task is not None else ["/predict"]
    pages = PAGE_ROUTES if config.playground else ()
    server.routes = (*posts, *(r for r in _ROUTES if r not in posts), *pages)
    app = Starlette(
        routes=[*(Route(path, server.predict, methods=["POST"]) for path in posts),
                Route("/health", server.health, methods=["GET"]),
                Route("/info", server.info, methods=["GET"]),
                Route("/metrics", server.metrics_text, methods=["GET"]),
                Route("/openapi.json", server.openapi, methods=["GET"]),
                *(page_routes() if config.playground else ())],
        exception_handlers={HTTPException: server.http_error, Exception: server.internal_error},
        lifespan=server.lifespan,
    )
    app.add_middleware(_ObserveRequests, metrics=server.metrics, routes=server.routes)
    app.state.server = server
    return app


def app_from_environment() -> Starlette:
    """The app of one `--workers N` process: settings from $NLP_SERVE_CONFIG (JSON)."""
    # a spawned worker: the CLI's logging set-up did not come with it
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    raw = json.loads(os.environ[CONFIG_ENV])
    config = ServeConfig(**{f.name: raw[f.name] for f in fields(ServeConfig) if f.name in raw})
    from nlp.deploy.server_http import configure_default

    # this process's protocol is LimitedHttpProtocol itself (run_server): give it the limits
    configure_default(config.max_header_bytes, config.max_headers, config.header_timeout)
    import torch

    # N processes share the cores: each gets its share of intra-op threads
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    torch.set_num_threads(max(1, cores // config.workers))
    return create_app(config)


def uvicorn_settings(config: ServeConfig) -> dict[str, Any]:
    """uvicorn.Config keywords for `config`: the limited protocol (nlp/deploy/server_http.py), no
    websockets, and a graceful-shutdown timeout that the drain finishes within."""
    from nlp.deploy.server_http import protocol_for

    return dict(host=config.host, port=config.port, timeout_graceful_shutdown=config.drain_timeout,
                log_level="info", access_log=False, lifespan="on", ws="none",
                http=protocol_for(config.max_header_bytes, config.max_headers, config.header_timeout))


def _bind_error(config: ServeConfig, err: OSError) -> ConfigError:
    """What the user can do about a socket that would not bind, naming the flag to change."""
    where = f"--port {config.port} on {config.host}"
    if err.errno == errno.EADDRINUSE:
        return ConfigError(f"{where} is in use ({err.strerror}); pick another --port, or --port 0 for a free one")
    if err.errno == errno.EACCES:
        return ConfigError(f"{where} is refused to this user ({err.strerror}; ports below 1024 need privileges); "
                           "pick a --port above 1023, or --port 0 for a free one")
    return ConfigError(f"--host {config.host!r} cannot be listened on here ({err.strerror or err}); give an "
                       "address of this machine: 127.0.0.1 (this machine only), 0.0.0.0 (every IPv4 interface) "
                       "or :: (every interface)")


def bind_sockets(config: ServeConfig) -> list[socket.socket]:
    """Listening sockets on `config.host` and `config.port`: one per address the host resolves to
    (`localhost`: 127.0.0.1 and ::1), on the port the first one got when `port` is 0. Bound here,
    before the server starts, so a port in use or a host that is not this machine's is one
    ConfigError (naming --port or --host), raised before the model loads; uvicorn, left to bind
    them, exited from its event loop while the model-loading thread ran in torch (SIGABRT)."""
    try:
        infos = socket.getaddrinfo(config.host or None, config.port, type=socket.SOCK_STREAM,
                                   flags=socket.AI_PASSIVE)
    except socket.gaierror as err:
        raise _bind_error(config, OSError(err.errno, err.strerror)) from None
    sockets: list[socket.socket] = []
    port = config.port
    try:
        for family, kind, proto, _, address in dict.fromkeys(infos):
            sock = socket.socket(family, kind, proto)
            sockets.append(sock)
            # as asyncio's create_server: TIME_WAIT connections of a previous server do not block
            # the port (a listening socket still does), and an IPv6 socket leaves IPv4 to its own
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind((address[0], port, *address[2:]))
            port = sock.getsockname()[1]  # --port 0: every address on the port the first one got
            sock.listen(2048)  # uvicorn's default backlog
            sock.set_inheritable(True)
    except OSError as err:
        for sock in sockets:
            sock.close()
        raise _bind_error(config, err) from None
    return sockets


def run_server(config: ServeConfig, sockets: list[socket.socket] | None = None) -> None:
    """Serve until SIGTERM / SIGINT; they stop accepting, drain requests in flight (at most
    `drain_timeout` seconds), then return, so the process exits 0.

    `sockets`: what `bind_sockets(config)` returned (the CLI binds them before it says where it
    serves); default: bound here, first. ConfigError when they cannot be (a port in use)."""
    import uvicorn

    sockets = sockets if sockets is not None else bind_sockets(config)
    common = uvicorn_settings(config)
    common["port"] = sockets[0].getsockname()[1]  # --port 0: the one chosen, for uvicorn's log line
    if config.workers > 1:
        # uvicorn's supervisor binds its own socket (what it passes its workers is version-specific):
        # the ones bound here proved the host and port free, and gave --port 0 its port
        for sock in sockets:
            sock.close()
        os.environ[CONFIG_ENV] = json.dumps(asdict(config))
        # the supervisor forwards SIGTERM to the workers, each drains its own requests; the protocol
        # goes by its import path to the spawned workers, which set its limits (app_from_environment)
        common["http"] = "nlp.deploy.server_http:LimitedHttpProtocol"
        uvicorn.run("nlp.deploy.server:app_from_environment", factory=True, workers=config.workers, **common)
        return
    server = uvicorn.Server(uvicorn.Config(create_app(config), **common))

    def after_drain(signum: int, frame: Any) -> None:
        # uvicorn catches SIGTERM / SIGINT while serving, drains, then raises the signal again
        # once the handlers are restored: by then the work is done, so return (exit 0).
        if not server.started:
            raise SystemExit(128 + signum)

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, after_drain)
    server.run(sockets=sockets)
