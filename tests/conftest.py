"""Shared test set-up: tests/ on sys.path (for the fixture modules), the cores shared out among
pytest-xdist's workers, one dataset cache for the run, and hub isolation fixtures."""

import os
import socket
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))


def pytest_configure(config):
    # Under pytest-xdist every worker would run torch (and each subprocess it starts) with one
    # thread per core, so n workers would ask for n times the cores there are: each worker gets
    # its share instead.
    workers = os.environ.get("PYTEST_XDIST_WORKER_COUNT")
    if workers:
        import torch

        threads = max(1, len(os.sched_getaffinity(0)) // int(workers))
        os.environ["OMP_NUM_THREADS"] = str(threads)
        torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def datasets_cache(tmp_path_factory) -> Path:
    """One fresh cache of the built-in datasets for the whole run, shared by pytest-xdist's
    workers (a build holds the cache's lock): each corpus is parsed once, not once per worker."""
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent  # the run's directory; each worker's own is inside it
    return base / "nlp-datasets-cache"


_HUB_ENV = ("NLP_OFFLINE", "HF_HUB_OFFLINE", "NLP_HUB_MIRROR", "NLP_HUB_CARDS")


@pytest.fixture
def isolated_hub(tmp_path, monkeypatch):
    """A private hub cache, no hub env vars, and a registry restored after the test."""
    from nlp.hub import registry

    monkeypatch.setenv("NLP_HUB_CACHE", str(tmp_path / "hub-cache"))
    for var in _HUB_ENV:
        monkeypatch.delenv(var, raising=False)
    registry._ensure_loaded()
    cards, aliases = dict(registry._CARDS), dict(registry._ALIASES)
    yield tmp_path / "hub-cache"
    registry._CARDS.clear()
    registry._CARDS.update(cards)
    registry._ALIASES.clear()
    registry._ALIASES.update(aliases)


@pytest.fixture
def no_network(monkeypatch):
    """Any attempt to open a connection fails the test."""

    def refuse(*args, **kwargs):
        raise AssertionError("a socket was opened")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
