"""The settings of `nlp serve` (its CLI flags), checked; light to import (no torch, no uvicorn)."""

from __future__ import annotations

from dataclasses import dataclass

from nlp._common import PRECISIONS, ConfigError

__all__ = ["PRECISIONS", "ServeConfig"]


@dataclass
class ServeConfig:
    """Settings of `nlp serve` (the CLI flags of the same names; `name` is the MODEL argument as given)."""

    model: str                       # a run, model or export directory
    # what the user called the model (a hub name, or the directory as they gave it), which /info,
    # the log and the CLI report: never the hub's cache path `model` holds for a hub name
    name: str | None = None          # default: model
    task: str | None = None          # default: what the model's config says
    precision: str = "auto"          # auto | fp32 | bf16 | fp16 | int8 (PyTorch models; nlp/models/precision.py)
    device: str | None = None        # default: cuda when available, else cpu
    host: str = "127.0.0.1"          # loopback only unless asked: there is no TLS here
    port: int = 8000
    workers: int = 1                 # processes, each with its own model (uvicorn workers)
    max_batch_tokens: int = 4096     # padded tokens per batch: 32 texts of 128 tokens
    max_batch_wait_ms: float = 5.0   # how long the oldest request waits for company
    max_batch_requests: int = 0      # requests per batch; 0 = only the token budget limits; 1 = no batching
    max_queue: int = 1024            # inputs waiting or running before 429
    max_inputs: int = 64             # inputs per request before 413
    max_text_chars: int = 100_000    # characters per text before 413
    # windows (model rows) one request may make before 413: 64 inputs of 100,000 characters would
    # make ~50,000 and hold the worker for minutes; 4,096 is a 400,000-character NER document
    max_request_windows: int = 4096
    token: str | None = None         # bearer token for /predict, /info, /metrics; None = open
    playground: bool = True          # the page at / and the API docs at /docs (static; they call the API)
    drain_timeout: float = 30.0      # seconds SIGTERM waits for requests in flight
    # the protocol layer (nlp/deploy/server_http.py): what one connection may hold or take
    max_header_bytes: int = 32768    # request line + headers before 431 (414 for the URL alone past 8 KiB)
    max_headers: int = 100           # header fields before 431
    header_timeout: float = 10.0     # seconds from connecting (or the last answer) to a complete request head
    body_timeout: float = 60.0       # seconds to receive a whole body before 408 (77 MB at 10 Mbit/s: raise it)

    def __post_init__(self) -> None:
        for name in ("port",):
            if not 0 <= getattr(self, name) <= 65535:
                raise ConfigError(f"{name}={getattr(self, name)} is not a TCP port (0-65535)")
        for name in ("workers", "max_batch_tokens", "max_queue", "max_inputs", "max_text_chars", "max_header_bytes",
                     "max_headers", "max_request_windows"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ConfigError(f"{name} must be a positive integer, got {v!r}")
        if self.max_batch_requests < 0:
            raise ConfigError(f"max_batch_requests must be >= 0 (0: no limit), got {self.max_batch_requests}")
        if self.max_batch_wait_ms < 0 or self.drain_timeout <= 0:
            raise ConfigError(f"max_batch_wait_ms={self.max_batch_wait_ms} must be >= 0 and "
                              f"drain_timeout={self.drain_timeout} > 0")
        for name in ("header_timeout", "body_timeout"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0:
                raise ConfigError(f"{name} must be a number of seconds > 0, got {v!r}")
        if self.max_inputs > self.max_queue:
            raise ConfigError(f"max_inputs={self.max_inputs} is larger than max_queue={self.max_queue}: such a "
                              "request could never be queued. Raise --max-queue or lower --max-inputs.")
        if self.precision not in PRECISIONS:
            raise ConfigError(f"precision {self.precision!r} is not one of {', '.join(PRECISIONS)}")
        if self.token is not None and not self.token:
            raise ConfigError("token is empty; leave it out to serve without authentication")

    @property
    def model_name(self) -> str:
        return self.name or self.model

    @property
    def max_body_bytes(self) -> int:
        # every character JSON-escaped (\uXXXX) in a question and a context, plus the envelope
        return 65536 + 12 * self.max_inputs * self.max_text_chars
