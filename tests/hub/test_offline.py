"""Offline mode opens no socket and says exactly what is missing and how to get it."""

from __future__ import annotations

import socket

import pytest
from hub_servers import sha

from nlp import hub
from nlp._common import HubError

VOCAB = b"[PAD]\n[UNK]\n"
WEIGHTS = b"w" * 50_000


@pytest.fixture
def no_network(monkeypatch):
    """Every attempt to connect anywhere fails the test loudly."""

    def refuse(*args, **kwargs):
        raise AssertionError(f"network access in offline mode: {args!r}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


def _cards(flaky, mirror):
    hub.register_card({"name": "u", "architecture": "ernie", "sources": [{"kind": "url", "files": [
        {"name": "w.bin", "url": f"{flaky.url}/w.bin", "sha256": sha(WEIGHTS)},
        {"name": "vocab.txt", "url": f"{flaky.url}/vocab.txt"}]}]})
    hub.register_card({"name": "h", "architecture": "bert", "sources": [
        {"kind": "hf", "repo": "team/tiny-model", "endpoint": mirror.url}]})


@pytest.mark.parametrize("how", ["NLP_OFFLINE", "HF_HUB_OFFLINE", "flag"])
def test_offline_full_cache(flaky, mirror, cache, monkeypatch, how):
    flaky.files.update({"w.bin": WEIGHTS, "vocab.txt": VOCAB})
    _cards(flaky, mirror)
    online_u, online_h = hub.download("u"), hub.download("h")
    # now cut the network off
    monkeypatch.setattr(socket.socket, "connect", _refuse)
    monkeypatch.setattr(socket, "create_connection", _refuse)
    if how == "flag":
        kw = {"local_files_only": True}
    else:
        monkeypatch.setenv(how, "1")
        kw = {}
        assert hub.is_offline()
    assert hub.download("u", **kw) == online_u
    assert hub.download("h", **kw) == online_h


def _refuse(*args, **kwargs):
    raise AssertionError(f"network access in offline mode: {args!r}")


def test_offline_partial_cache_names_missing_files(flaky, mirror, cache, monkeypatch):
    flaky.files.update({"w.bin": WEIGHTS, "vocab.txt": VOCAB})
    _cards(flaky, mirror)
    path = hub.download("u")
    (path / "w.bin").unlink()
    monkeypatch.setattr(socket.socket, "connect", _refuse)
    monkeypatch.setattr(socket, "create_connection", _refuse)
    monkeypatch.setenv("NLP_OFFLINE", "1")
    with pytest.raises(HubError) as err:
        hub.download("u")
    msg = str(err.value)
    assert "w.bin" in msg and "vocab.txt" not in msg.split("Missing")[1].split("Fix")[0]
    assert "nlp hub download u" in msg and "NLP_HUB_CACHE" in msg and "NLP_OFFLINE" in msg


def test_offline_partial_hf_cache(mirror, cache, monkeypatch):
    hub.register_card({"name": "h", "architecture": "bert", "sources": [
        {"kind": "hf", "repo": "team/tiny-model", "endpoint": mirror.url,
         "files": ["config.json", "vocab.txt", "model.safetensors"]}]})
    path = hub.download("h")
    (path / "model.safetensors").unlink()
    monkeypatch.setattr(socket.socket, "connect", _refuse)
    monkeypatch.setattr(socket, "create_connection", _refuse)
    with pytest.raises(HubError, match=r"model\.safetensors(.|\n)*nlp hub download h"):
        hub.download("h", local_files_only=True)


def test_offline_empty_cache(flaky, mirror, cache, monkeypatch, no_network):
    _cards(flaky, mirror)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(HubError) as err:
        hub.download("h")
    assert "team/tiny-model" in str(err.value) and "nlp hub download h" in str(err.value)
    with pytest.raises(HubError, match=r"w\.bin, vocab\.txt"):
        hub.download("u")


def test_offline_builtin_card_names_every_source(cache, no_network):
    with pytest.raises(HubError) as err:
        hub.download("ernie-3.0-mini-zh", local_files_only=True)
    msg = str(err.value)
    for part in ("nghuyong/ernie-3.0-mini-zh", "PaddlePaddle/ernie-3.0-mini-zh", "model_state.pdparams",
                 "nlp hub download ernie-3.0-mini-zh"):
        assert part in msg


def test_offline_after_filtered_hf_download(tmp_path, cache, monkeypatch):
    """Only the weights the loaders need are fetched (safetensors over .bin, no tf/flax), and the
    cache still counts as complete offline."""
    from hub_servers import MirrorServer, make_repo

    root = tmp_path / "m"
    make_repo(root, "team/both", {"config.json": b"{}", "model.safetensors": b"s" * 1000,
                                  "pytorch_model.bin": b"b" * 1000, "tf_model.h5": b"t" * 1000})
    srv = MirrorServer(root)
    try:
        hub.register_card({"name": "both", "architecture": "bert", "sources": [{"kind": "hf", "repo": "team/both", "endpoint": srv.url}]})
        path = hub.download("both")
    finally:
        srv.stop()
    assert sorted(p.name for p in path.iterdir()) == ["config.json", "model.safetensors"]
    monkeypatch.setattr(socket.socket, "connect", _refuse)
    monkeypatch.setattr(socket, "create_connection", _refuse)
    assert hub.download("both", local_files_only=True) == path
