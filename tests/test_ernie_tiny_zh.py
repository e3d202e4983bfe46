"""The shipped ernie-tiny-zh: a hub name with a sha256-verified builtin source, loading offline."""

from __future__ import annotations

import hashlib
import socket
from importlib import resources
from pathlib import Path

import pytest
import torch

import nlp
from nlp._common import HubError
from nlp.hub import registry

ASSET = Path(str(resources.files("nlp").joinpath("assets/ernie-tiny-zh")))


@pytest.fixture(autouse=True)
def _isolated(tmp_path, monkeypatch):
    """A private, empty hub cache; no socket may connect (the builtin source is package data)."""
    monkeypatch.setenv("NLP_HUB_CACHE", str(tmp_path / "cache"))
    for var in ("NLP_OFFLINE", "HF_HUB_OFFLINE", "NLP_HUB_MIRROR", "NLP_HUB_CARDS"):
        monkeypatch.delenv(var, raising=False)

    def refuse(*args, **kwargs):
        raise AssertionError("a socket was opened")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    registry._ensure_loaded()
    cards, aliases = dict(registry._CARDS), dict(registry._ALIASES)
    yield
    registry._CARDS.clear()
    registry._CARDS.update(cards)
    registry._ALIASES.clear()
    registry._ALIASES.update(aliases)


def test_card_lists_every_shipped_file_with_its_sha256():
    card = nlp.hub.get_card("ernie-tiny-zh")
    (src,) = card.sources
    assert src.kind == "builtin" and card.heads == ("masked-lm",)
    shipped = {p.name for p in ASSET.iterdir() if p.is_file()}
    assert {f.name for f in src.files} == shipped
    for f in src.files:
        data = (ASSET / f.name).read_bytes()
        assert f.sha256 == hashlib.sha256(data).hexdigest(), f.name
        assert f.size == len(data)
    weights = ASSET / "model.safetensors"
    assert weights.stat().st_size <= 25 * 2**20


def test_download_verifies_sha256(tmp_path):
    card = nlp.hub.get_card("ernie-tiny-zh").to_dict()
    card["name"] = "ernie-tiny-zh-tampered"
    files = card["sources"][0]["files"]
    for f in files:
        if f["name"] == "config.json":
            f["sha256"] = "0" * 64
    nlp.hub.register_card(card)
    with pytest.raises(HubError, match="(?i)sha256|checksum|digest"):
        nlp.hub.download("ernie-tiny-zh-tampered")


def test_loads_offline_from_package_data(tmp_path):
    path = nlp.hub.download("ernie-tiny-zh")
    assert (path / "model.safetensors").is_file() and (path / "tokenizer_config.json").is_file()
    model = nlp.AutoModelForMaskedLM.from_pretrained("ernie-tiny-zh")
    assert next(model.parameters()).dtype == torch.float32  # fp16 on disk, fp32 to compute
    assert 5e6 < sum(p.numel() for p in model.parameters()) < 12e6
