"""The server's metrics in the Prometheus text format (version 0.0.4), without a client library.

    metrics = ServerMetrics()
    metrics.observe_request("/predict", 200, seconds=0.012)
    metrics.render(queue_depth=3)   # the text GET /metrics returns

Counters and histograms are guarded by one lock: the event loop and the batch worker thread
both write them.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Sequence

__all__ = ["CONTENT_TYPE", "Histogram", "ServerMetrics"]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

# request latency, seconds: from 1 ms to 30 s
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
SIZE_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
TOKEN_BUCKETS = (64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536)


def _fmt(value: float) -> str:
    if value == float("inf"):
        return "+Inf"
    return repr(float(value)) if not float(value).is_integer() else str(int(value))


def _labels(pairs: Sequence[tuple[str, str]]) -> str:
    if not pairs:
        return ""
    esc = (v.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"') for _, v in pairs)
    return "{" + ",".join(f'{k}="{v}"' for (k, _), v in zip(pairs, esc)) + "}"


class Histogram:
    """Cumulative buckets, sum and count (one label set)."""

    def __init__(self, buckets: Sequence[float]) -> None:
        self.buckets = tuple(buckets)
        self.counts = [0] * len(self.buckets)
        self.sum = 0.0
        self.count = 0

    def observe(self, value: float) -> None:
        for i, bound in enumerate(self.buckets):
            if value <= bound:
                self.counts[i] += 1
        self.sum += value
        self.count += 1

    def lines(self, name: str, labels: Sequence[tuple[str, str]] = ()) -> list[str]:
        out = [f"{name}_bucket{_labels([*labels, ('le', _fmt(b))])} {c}" for b, c in zip(self.buckets, self.counts)]
        out.append(f"{name}_bucket{_labels([*labels, ('le', '+Inf')])} {self.count}")
        out.append(f"{name}_sum{_labels(labels)} {_fmt(self.sum)}")
        out.append(f"{name}_count{_labels(labels)} {self.count}")
        return out


class ServerMetrics:
    """Requests by endpoint and status, latency, batch sizes, queue depth, model readiness."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.requests: dict[tuple[str, str], int] = defaultdict(int)
        self.latency: dict[str, Histogram] = {}
        self.batch_requests = Histogram(SIZE_BUCKETS)
        self.batch_inputs = Histogram(SIZE_BUCKETS)
        self.batch_tokens = Histogram(TOKEN_BUCKETS)
        self.forward_seconds = Histogram(LATENCY_BUCKETS)
        self.inputs_total = 0

    def observe_request(self, endpoint: str, status: int, seconds: float) -> None:
        with self._lock:
            self.requests[(endpoint, str(status))] += 1
            self.latency.setdefault(endpoint, Histogram(LATENCY_BUCKETS)).observe(seconds)

    def observe_batch(self, requests: int, inputs: int, padded_tokens: int, seconds: float) -> None:
        with self._lock:
            self.batch_requests.observe(requests)
            self.batch_inputs.observe(inputs)
            self.batch_tokens.observe(padded_tokens)
            self.forward_seconds.observe(seconds)
            self.inputs_total += inputs

    def render(self, *, queue_depth: int, queue_capacity: int, ready: bool) -> str:
        p = "nlp_serve_"
        with self._lock:
            out = [f"# HELP {p}requests_total HTTP requests answered, by endpoint and status code.",
                   f"# TYPE {p}requests_total counter"]
            out += [f"{p}requests_total{_labels([('endpoint', e), ('status', s)])} {n}"
                    for (e, s), n in sorted(self.requests.items())]
            out += [f"# HELP {p}request_duration_seconds Time from request to response, by endpoint.",
                    f"# TYPE {p}request_duration_seconds histogram"]
            for endpoint, hist in sorted(self.latency.items()):
                out += hist.lines(f"{p}request_duration_seconds", [("endpoint", endpoint)])
            for name, hist, help_ in (
                ("batch_requests", self.batch_requests, "Requests that shared one batch."),
                ("batch_inputs", self.batch_inputs, "Inputs (texts, questions) in one batch."),
                ("batch_padded_tokens", self.batch_tokens, "Padded tokens of one batch (budget: --max-batch-tokens)."),
                ("forward_seconds", self.forward_seconds, "Time of one batch through the pipeline."),
            ):
                out += [f"# HELP {p}{name} {help_}", f"# TYPE {p}{name} histogram", *hist.lines(p + name)]
            out += [f"# HELP {p}inputs_total Inputs run through the model.", f"# TYPE {p}inputs_total counter",
                    f"{p}inputs_total {self.inputs_total}"]
        out += [f"# HELP {p}queue_depth Inputs accepted and not yet answered.", f"# TYPE {p}queue_depth gauge",
                f"{p}queue_depth {queue_depth}",
                f"# HELP {p}queue_capacity Inputs the queue holds before answering 429 (--max-queue).",
                f"# TYPE {p}queue_capacity gauge", f"{p}queue_capacity {queue_capacity}",
                f"# HELP {p}model_ready 1 once the model is loaded.", f"# TYPE {p}model_ready gauge",
                f"{p}model_ready {int(ready)}"]
        return "\n".join(out) + "\n"
