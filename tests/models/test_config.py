from __future__ import annotations

import json
import re

import pytest
import transformers

from nlp._common import ConfigError
from nlp.models import ErnieConfig


def test_round_trip_keeps_unknown_keys(tmp_path):
    data = {"model_type": "bert", "vocab_size": 21128, "directionality": "bidi",
            "pooler_fc_size": 768, "architectures": ["BertForMaskedLM"]}
    (tmp_path / "config.json").write_text(json.dumps(data))
    config = ErnieConfig.from_pretrained(tmp_path)
    assert config.vocab_size == 21128 and config.extra["directionality"] == "bidi"
    out = tmp_path / "out"
    config.save_pretrained(out)
    saved = json.loads((out / "config.json").read_text())
    assert saved["directionality"] == "bidi" and saved["pooler_fc_size"] == 768
    assert "use_task_id" not in saved  # BERT configs stay plain BertConfig
    assert ErnieConfig.from_pretrained(out) == config


def test_labels_like_transformers(tmp_path):
    config = ErnieConfig(num_labels=3)
    assert config.id2label == {0: "LABEL_0", 1: "LABEL_1", 2: "LABEL_2"}
    config = ErnieConfig(id2label={"0": "neg", "1": "pos"})
    assert config.num_labels == 2 and config.label2id == {"neg": 0, "pos": 1}
    config.save_pretrained(tmp_path)
    hf = transformers.AutoConfig.from_pretrained(tmp_path)
    assert hf.id2label == {0: "neg", 1: "pos"} and hf.num_labels == 2
    # a num_labels override replaces the saved label maps
    assert ErnieConfig.from_pretrained(tmp_path, num_labels=5).num_labels == 5
    with pytest.raises(ConfigError, match="num_labels=3 disagrees with id2label"):
        ErnieConfig(num_labels=3, id2label={0: "a"})


def test_transformers_config_loads_here(tmp_path):
    transformers.ErnieConfig(hidden_size=64, num_attention_heads=4, use_task_id=True,
                             problem_type="single_label_classification").save_pretrained(tmp_path)
    config = ErnieConfig.from_pretrained(tmp_path)
    assert config.use_task_id and config.hidden_size == 64 and config.model_type == "ernie"
    assert config.problem_type == "single_label_classification"
    assert config.extra["transformers_version"] == transformers.__version__  # unknown key kept


@pytest.mark.parametrize("field,value,msg", [
    ("hidden_size", 100, "hidden_size=100 is not divisible by num_attention_heads=12"),
    ("vocab_size", 0, "vocab_size must be a positive int, got 0"),
    ("hidden_dropout_prob", 1.5, r"hidden_dropout_prob must be a float in \[0, 1\), got 1.5"),
    ("hidden_act", "gleu", "Did you mean 'gelu'"),
    ("model_type", "roberta", "model_type='roberta' is not supported"),
    ("layer_norm_eps", 0, "layer_norm_eps must be a float in"),
    ("pad_token_id", 40000, "pad_token_id=40000 is outside the vocabulary"),
])
def test_validation_names_field_and_value(field, value, msg):
    with pytest.raises(ConfigError, match=msg):
        ErnieConfig(**{field: value})


def test_bert_has_no_task_ids():
    with pytest.raises(ConfigError, match="use_task_id=True needs model_type='ernie'"):
        ErnieConfig(model_type="bert", use_task_id=True)


def test_bad_json(tmp_path):
    (tmp_path / "config.json").write_text("{nope")
    with pytest.raises(ConfigError, match="not valid JSON"):
        ErnieConfig.from_pretrained(tmp_path)
    with pytest.raises(ConfigError, match="no config file"):
        ErnieConfig.from_pretrained(tmp_path / "missing")


def _tiny(**changes):
    return {**ErnieConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                          intermediate_size=64).to_dict(), **changes}


def test_num_parameters_is_the_encoder_size():
    from nlp.models import ErnieModel

    for config in (ErnieConfig(**{k: v for k, v in _tiny().items() if k != "id2label"}),
                   ErnieConfig(vocab_size=90, hidden_size=16, num_attention_heads=2, num_hidden_layers=1,
                               intermediate_size=40, use_task_id=True, task_type_vocab_size=16)):
        assert config.num_parameters == sum(p.numel() for p in ErnieModel(config).parameters())


@pytest.mark.parametrize("changes", [{"num_hidden_layers": 10**9}, {"intermediate_size": 10**12}])
def test_an_absurd_size_is_refused_before_anything_is_allocated(tmp_path, changes):
    """Issue 15: such a config.json allocated until the machine ran out of memory."""
    import time

    import nlp
    from nlp.models import ErnieModel
    from nlp.models.config import MAX_PARAMETERS

    (tmp_path / "config.json").write_text(json.dumps(_tiny(**changes)))
    for load in (ErnieConfig.from_pretrained, ErnieModel.from_pretrained, nlp.AutoModel.from_pretrained):
        start = time.perf_counter()
        with pytest.raises(ConfigError) as err:
            load(tmp_path)
        assert time.perf_counter() - start < 0.5
        msg = str(err.value)
        key, value = next(iter(changes.items()))
        assert str(tmp_path / "config.json") in msg and f"{key}={value}" in msg
        assert f"more than the {MAX_PARAMETERS:,} parameters" in msg
        figures = [int(x.replace(",", "")) for x in re.findall(r"about ([\d,]+) parameters \(([\d,]+) bytes", msg)[0]]
        assert figures[0] > MAX_PARAMETERS and figures[1] == 4 * figures[0]


def test_a_model_larger_than_the_memory_is_refused(monkeypatch):
    from nlp.models import config as config_module

    monkeypatch.setattr(config_module, "_physical_memory", lambda: 2**20)  # a 1 MiB machine
    with pytest.raises(ConfigError, match=r"more than this machine's memory \(0.0 GiB\)"):
        ErnieConfig(**{k: v for k, v in _tiny(vocab_size=10000).items() if k != "id2label"})
    ErnieConfig(**{k: v for k, v in _tiny().items() if k != "id2label"})  # 0.1 MiB of weights: fine


@pytest.mark.parametrize("value", [2.5, 1e9, 0, -3, "12", True, None])
def test_sizes_must_be_positive_integers(tmp_path, value):
    (tmp_path / "config.json").write_text(json.dumps(_tiny(num_hidden_layers=value)))
    with pytest.raises(ConfigError, match=f"num_hidden_layers must be a positive int, got {value!r}"):
        ErnieConfig.from_pretrained(tmp_path)


@pytest.mark.parametrize("field", ["initializer_range", "layer_norm_eps", "hidden_dropout_prob"])
def test_non_finite_floats_are_refused(field):
    for value in (float("nan"), float("inf")):
        with pytest.raises(ConfigError, match=field):
            ErnieConfig(**{field: value})
