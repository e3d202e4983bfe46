"""Fixtures of the hub tests; the servers themselves live in hub_servers.py."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # --import-mode=importlib: make hub_servers importable

from hub_servers import FlakyServer, MirrorServer, make_repo

from nlp.hub import registry


@pytest.fixture
def mirror_root(tmp_path):
    root = tmp_path / "mirror"
    make_repo(
        root,
        "team/tiny-model",
        {
            "config.json": b'{"model_type": "bert", "hidden_size": 8}',
            "vocab.txt": "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n你\n好\n".encode(),
            "model.safetensors": os.urandom(300_000),
            "sub/extra.json": b"{}",
        },
    )
    return root


@pytest.fixture
def mirror(mirror_root):
    srv = MirrorServer(mirror_root)
    yield srv
    srv.stop()


@pytest.fixture
def cache(tmp_path, monkeypatch):
    c = tmp_path / "cache"
    monkeypatch.setenv("NLP_HUB_CACHE", str(c))
    for var in ("NLP_OFFLINE", "HF_HUB_OFFLINE", "NLP_HUB_MIRROR", "NLP_HUB_CARDS"):
        monkeypatch.delenv(var, raising=False)
    return c


@pytest.fixture(autouse=True)
def _isolated_registry():
    """Cards registered by a test do not leak into the next one."""
    registry._ensure_loaded()
    cards, aliases = dict(registry._CARDS), dict(registry._ALIASES)
    yield
    registry._CARDS.clear()
    registry._CARDS.update(cards)
    registry._ALIASES.clear()
    registry._ALIASES.update(aliases)


@pytest.fixture
def flaky():
    srv = FlakyServer({})
    yield srv
    srv.stop()
