"""`nlp serve MODEL`: serve a fine-tuned (or exported) model over HTTP, with dynamic batching."""

from __future__ import annotations

import argparse
import os

from nlp._common import PRECISIONS

TOKEN_ENV = "NLP_SERVE_TOKEN"

EPILOG = """examples:
  nlp serve runs/sentiment-reviews                      # http://127.0.0.1:8000, precision auto
  nlp serve runs/ner --port 9000 --max-batch-wait-ms 10
  NLP_SERVE_TOKEN=s3cret nlp serve exports/sentiment-int8 --host 0.0.0.0   # bearer token required
  nlp serve runs/cmrc --workers 2                       # two processes, each with its own model
  nlp serve --task ner                                  # no model: the task's shipped default
  nlp serve runs/ner --no-playground                    # the API only: no page at / or /docs

  curl -s localhost:8000/predict -H 'Content-Type: application/json' \\
       -d '{"inputs": ["这家餐厅的服务非常好", "太难吃了"], "parameters": {"top_k": 2}}'
  curl -s localhost:8000/health; curl -s localhost:8000/info; curl -s localhost:8000/metrics

MODEL is a run directory (train.output_dir), a model directory or an `nlp export` directory;
left out, --task's default model (shipped with the package) is served.
Requests that arrive together share one batch, up to --max-batch-tokens padded tokens;
--max-batch-requests 1 turns batching off. A full queue answers 429 (Retry-After), too many or
too long inputs 413, malformed requests 422. A browser at / gets the playground (try the model:
a text box, the task's options, the result drawn) and at /docs the API's documentation. SIGTERM (or Ctrl-C) stops accepting, finishes the
requests in flight (at most --drain-timeout seconds) and exits 0. See docs/serving.md.
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    from nlp.deploy.server_config import ServeConfig

    d = ServeConfig(model="")
    p = subparsers.add_parser("serve", help="serve a model over HTTP (POST /predict, /health, /metrics)",
                              epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", metavar="MODEL", nargs="?", default=None,
                   help="a run, model or export directory or a hub name (left out: --task's default model)")
    p.add_argument("--host", default=d.host, help=f"address to listen on (default {d.host}: this machine only)")
    p.add_argument("--port", type=int, default=d.port,
                   help=f"TCP port (default {d.port}; 0: a free one, which the first line printed names)")
    p.add_argument("--workers", type=int, default=d.workers,
                   help="server processes on the one port, each loading its own model and splitting the CPU "
                        "threads (default 1)")
    p.add_argument("--max-batch-tokens", type=int, default=d.max_batch_tokens,
                   help=f"padded tokens per batch (default {d.max_batch_tokens}; on CPU run as passes of a quarter of it)")
    p.add_argument("--max-batch-wait-ms", type=float, default=d.max_batch_wait_ms,
                   help=f"how long a request waits for others to batch with (default {d.max_batch_wait_ms:g})")
    p.add_argument("--max-batch-requests", type=int, default=d.max_batch_requests,
                   help="requests per batch (default 0: the token budget decides; 1: no batching)")
    p.add_argument("--max-queue", type=int, default=d.max_queue,
                   help=f"inputs queued or running before answering 429 (default {d.max_queue})")
    p.add_argument("--max-inputs", type=int, default=d.max_inputs,
                   help=f"inputs per request before answering 413 (default {d.max_inputs})")
    p.add_argument("--max-text-chars", type=int, default=d.max_text_chars,
                   help=f"characters per text before answering 413 (default {d.max_text_chars})")
    p.add_argument("--token", default=os.environ.get(TOKEN_ENV) or None,
                   help="require `Authorization: Bearer TOKEN` on /predict, /info and /metrics (any characters; "
                        f"default: ${TOKEN_ENV}, which, unlike the command line, other users cannot see in ps)")
    p.add_argument("--no-playground", dest="playground", action="store_false",
                   help="serve no page at / (the playground) and /docs (the API docs): the JSON API only")
    p.add_argument("--task", default=None, help="the task, when the model's config does not say")
    p.add_argument("--precision", default=d.precision, choices=PRECISIONS,
                   help="PyTorch models: auto (bf16 where the CPU or GPU runs it natively, else the precision "
                        "the model declares, else fp32), fp32, bf16, fp16 (CUDA), int8 (CPU: the encoder's linear "
                        "layers in int8)")
    p.add_argument("--device", default=None, help="cpu, cuda, cuda:1 (default: cuda when available)")
    p.add_argument("--drain-timeout", type=float, default=d.drain_timeout,
                   help=f"seconds SIGTERM waits for requests in flight (default {d.drain_timeout:g}); what has not "
                        "run by then is answered 503 with Retry-After")
    p.add_argument("--max-request-windows", type=int, default=d.max_request_windows,
                   help=f"windows (model rows) one request may make before answering 413 (default "
                        f"{d.max_request_windows})")
    p.add_argument("--max-header-bytes", type=int, default=d.max_header_bytes,
                   help=f"request line and headers before answering 431 (default {d.max_header_bytes})")
    p.add_argument("--header-timeout", type=float, default=d.header_timeout,
                   help=f"seconds a connection may take to send a request head (default {d.header_timeout:g}); "
                        "idle connections are closed after it")
    p.add_argument("--body-timeout", type=float, default=d.body_timeout,
                   help=f"seconds to receive a whole request body before answering 408 (default {d.body_timeout:g})")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import sys

    from nlp.commands._models import model_and_name
    from nlp.deploy.server import bind_sockets, run_server
    from nlp.deploy.server_config import ServeConfig
    from nlp.deploy.server_model import backend_advice, check_servable

    model, name = model_and_name(args.model, args.task)
    config = ServeConfig(model=model, name=name, task=args.task, precision=args.precision, device=args.device,
                         host=args.host, port=args.port, workers=args.workers,
                         max_batch_tokens=args.max_batch_tokens, max_batch_wait_ms=args.max_batch_wait_ms,
                         max_batch_requests=args.max_batch_requests, max_queue=args.max_queue,
                         max_inputs=args.max_inputs, max_text_chars=args.max_text_chars, token=args.token,
                         playground=args.playground,
                         drain_timeout=args.drain_timeout, max_request_windows=args.max_request_windows,
                         max_header_bytes=args.max_header_bytes,
                         header_timeout=args.header_timeout, body_timeout=args.body_timeout)
    # user errors now, before the server listens: a damaged export, a precision it cannot run,
    # then a port in use or a host not this machine's, before the model loads
    task = check_servable(config.model, task=config.task, precision=config.precision, device=config.device)
    sockets = bind_sockets(config)
    host = f"[{config.host}]" if ":" in config.host else config.host
    where = f"http://{host}:{sockets[0].getsockname()[1]}"  # --port 0: the port it got
    print(f"serving {config.model_name} ({task}) on {where} "
          f"(workers {config.workers}); SIGTERM or Ctrl-C drains and stops", file=sys.stderr)
    if config.playground:
        print(f"playground: {where}/  API docs: {where}/docs", file=sys.stderr)
    if (advice := backend_advice(config.model, name=config.model_name, device=config.device)) is not None:
        print(f"note: {advice}", file=sys.stderr)
    run_server(config, sockets)
    return 0
