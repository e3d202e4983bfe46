"""nlp.auto: a name goes through the hub, then the layer's loader; Paddle sources convert on arrival."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import nlp
from nlp._common import HubError, UnknownNameError
from paddle_fixtures import TINY, VOCAB, paddle_backbone, paddle_config, write_paddle_dir


@pytest.fixture(autouse=True)
def _isolated(isolated_hub):
    """A private hub cache and registry for each test (tests/conftest.py)."""


@pytest.fixture
def paddle_model_card(tmp_path):
    """A registered name whose only source is a PaddleNLP-format directory on this machine."""
    config = paddle_config("ErnieModel")
    state = paddle_backbone(config, np.random.default_rng(0))
    src = write_paddle_dir(tmp_path / "paddle-src", state, config)
    nlp.hub.register_card({
        "name": "tiny-paddle-ernie", "architecture": "ernie", "license": "apache-2.0",
        "sources": [{"kind": "local", "path": str(src), "format": "paddle"}],
    })
    return src


def test_auto_config_of_a_preset_needs_no_network(no_network):
    config = nlp.AutoConfig.from_pretrained("ernie-3.0-mini-zh", num_labels=3)
    assert (config.hidden_size, config.num_hidden_layers, config.vocab_size) == (384, 6, 40000)
    assert config.num_labels == 3


def test_local_directory_round_trip(tmp_path, no_network):
    model = nlp.AutoModel.from_config("ernie-3.0-nano-zh", num_hidden_layers=1, vocab_size=64)
    model.save_pretrained(tmp_path / "m")
    loaded = nlp.AutoModel.from_pretrained(tmp_path / "m")
    ids = torch.randint(1, 64, (2, 7))
    model.eval()
    torch.testing.assert_close(loaded(ids).last_hidden_state, model(ids).last_hidden_state)


def test_paddle_source_is_converted_once_and_loads(paddle_model_card, tmp_path, no_network):
    model = nlp.AutoModel.from_pretrained("tiny-paddle-ernie")
    assert model.config.hidden_size == TINY["hidden_size"]
    path = nlp.hub.download("tiny-paddle-ernie")
    assert (path / "model.safetensors").is_file() and (path / "config.json").is_file()
    stamp = (path / "model.safetensors").stat().st_mtime_ns
    again = nlp.AutoModel.from_pretrained("tiny-paddle-ernie")  # from the converted cache
    assert (path / "model.safetensors").stat().st_mtime_ns == stamp
    ids = torch.tensor([[1, 5, 6, 2]])
    torch.testing.assert_close(again(ids).last_hidden_state, model(ids).last_hidden_state)

    tok = nlp.AutoTokenizer.from_pretrained("tiny-paddle-ernie")
    enc = tok("你好世界")
    assert tok.convert_ids_to_tokens(enc["input_ids"]) == ["[CLS]", "你", "好", "世", "界", "[SEP]"]
    assert len(tok) == len(VOCAB)


def test_unknown_name_suggests_the_close_one():
    with pytest.raises(UnknownNameError, match=r"Did you mean 'ernie-3.0-mini-zh'"):
        nlp.AutoModel.from_pretrained("ernie-3.0-mni-zh")


def test_offline_and_not_cached_names_the_fetch_command(no_network):
    with pytest.raises(HubError, match=r"nlp hub download ernie-3.0-mini-zh"):
        nlp.AutoTokenizer.from_pretrained("ernie-3.0-mini-zh", local_files_only=True)
