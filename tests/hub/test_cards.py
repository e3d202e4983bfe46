"""The registry: every zoo preset has a valid card; users add and repoint cards."""

from __future__ import annotations

import json

import pytest
import yaml

from nlp import hub
from nlp._common import ConfigError
from nlp.hub import registry

ZOO = [
    "ernie-1.0-base-zh",
    *(f"ernie-3.0-{s}-zh" for s in ("xbase", "base", "medium", "mini", "micro", "nano")),
    *(f"ernie-3.0-tiny-{s}-v2-zh" for s in ("base", "medium", "mini", "micro", "nano", "pico")),
    "bert-base-chinese", "chinese-roberta-wwm-ext", "chinese-roberta-wwm-ext-large",
    "chinese-macbert-base", "chinese-macbert-large", "rbt3",
]


@pytest.mark.parametrize("name", ZOO)
def test_every_zoo_preset_has_a_card(name):
    card = hub.get_card(name)
    assert card.architecture in ("ernie", "bert") and card.preset == name and card.sources
    for src in card.sources:
        if src.kind == "url":
            assert all(f.url.startswith("https://bj.bcebos.com/paddlenlp/") for f in src.files)
            assert {f.name for f in src.files} == {"model_state.pdparams", "vocab.txt"}
        if src.format == "paddle":
            assert card.config["hidden_size"] > 0  # the converter needs a config next to the weights
    again = hub.ModelCard.from_dict(card.to_dict())  # round trip through the file format
    assert again == card and again.config == card.config


def test_list_models_glob_and_substring():
    assert hub.list_models("ernie-3.0-tiny-*") == sorted(f"ernie-3.0-tiny-{s}-v2-zh" for s in ("base", "medium", "mini", "micro", "nano", "pico"))
    assert hub.list_models("macbert") == ["chinese-macbert-base", "chinese-macbert-large"]
    assert set(ZOO) <= set(hub.list_models())


def test_invalid_card_reports_every_problem():
    with pytest.raises(ConfigError) as err:
        hub.register_card({"name": "bad name", "architecture": "gpt", "colour": 1, "sources": [
            {"kind": "ftp"}, {"kind": "hf", "repo": "no-slash"}, {"kind": "url", "files": [{"name": "../x", "sha256": "abc"}]}]})
    msg = str(err.value)
    for part in ("'name'", "architecture 'gpt'", "colour", "kind 'ftp'", "owner/name", "relative path", "64 hex", "http(s)://"):
        assert part in msg, part


def test_register_cards_file_yaml_and_json(tmp_path):
    card = {"name": "team-bert", "architecture": "bert", "license": "mit",
            "sources": [{"kind": "local", "path": str(tmp_path)}]}
    (tmp_path / "cards.yaml").write_text(yaml.safe_dump({"cards": [card]}))
    (tmp_path / "one.json").write_text(json.dumps(dict(card, name="team-bert-2")))
    assert [c.name for c in hub.register_cards_file(tmp_path / "cards.yaml")] == ["team-bert"]
    assert [c.name for c in hub.register_cards_file(tmp_path / "one.json")] == ["team-bert-2"]
    assert hub.download("team-bert") == tmp_path
    with pytest.raises(ConfigError, match="cannot read"):
        hub.register_cards_file(tmp_path / "missing.yaml")
    (tmp_path / "broken.yaml").write_text("cards: [name: x")
    with pytest.raises(ConfigError, match="not valid YAML"):
        hub.register_cards_file(tmp_path / "broken.yaml")


def test_cards_from_env_and_user_card_replaces_builtin(tmp_path, monkeypatch):
    (tmp_path / "c.yaml").write_text(yaml.safe_dump([{"name": "rbt3", "architecture": "bert", "mirror": "http://mirror.local",
                                                      "sources": [{"kind": "hf", "repo": "team/rbt3"}]}]))
    monkeypatch.setenv("NLP_HUB_CARDS", str(tmp_path / "c.yaml"))
    monkeypatch.setattr(registry, "_LOADED", False)
    registry._CARDS.clear()
    card = hub.get_card("rbt3")
    assert card.sources[0].repo == "team/rbt3" and card.mirror == "http://mirror.local"
    from nlp.hub.download import effective_sources

    first = effective_sources(card)[0]
    assert first.kind == "mirror" and first.endpoint == "http://mirror.local" and first.repo == "team/rbt3"
    assert "ernie-3.0-mini-zh" in hub.list_models()  # the built-ins are still there


def test_env_mirror_comes_first(monkeypatch):
    from nlp.hub.download import effective_sources

    monkeypatch.setenv("NLP_HUB_MIRROR", "http://a:1, /srv/mirror")
    srcs = effective_sources(hub.get_card("ernie-3.0-base-zh"))
    assert [(s.kind, s.endpoint, s.path, s.repo) for s in srcs[:2]] == [
        ("mirror", "http://a:1", None, "nghuyong/ernie-3.0-base-zh"),
        ("mirror", None, "/srv/mirror", "nghuyong/ernie-3.0-base-zh"),
    ]
    assert srcs[2].repo == "nghuyong/ernie-3.0-base-zh" and srcs[2].kind == "hf"


@pytest.mark.parametrize("size", ["base", "medium", "mini", "micro", "nano"])
def test_taskflow_uie_cards(size):
    """uie-* name Taskflow's own files (converted on arrival as PaddleNLP's UIE) at their preset's shape."""
    from nlp.models import preset_config

    card = hub.get_card(f"uie-{size}")
    assert card.heads == ("information-extraction",) and card.preset == f"ernie-3.0-{size}-zh"
    (src,) = card.sources
    assert src.kind == "url" and src.format == "paddle"
    assert {f.name for f in src.files} == {"model_state.pdparams", "config.json", "vocab.txt",
                                           "special_tokens_map.json", "tokenizer_config.json"}
    assert all(f.url.startswith("https://bj.bcebos.com/paddlenlp/taskflow/information_extraction/") for f in src.files)
    assert f"uie_{size}_v1.1/model_state.pdparams" in next(f.url for f in src.files if f.name == "model_state.pdparams")
    preset = preset_config(card.preset)
    assert {k: card.config[k] for k in ("hidden_size", "num_hidden_layers", "intermediate_size")} == \
        {"hidden_size": preset.hidden_size, "num_hidden_layers": preset.num_hidden_layers,
         "intermediate_size": preset.intermediate_size}
    assert hub.ModelCard.from_dict(card.to_dict()) == card
