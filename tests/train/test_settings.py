"""Settings schema: every problem reported at once, coercion of override strings, overrides."""

import pytest
import yaml

from nlp._common import ConfigError
from nlp.train import TrainSettings, apply_overrides, from_dict, parse_overrides, to_dict


def test_every_bad_key_is_reported_at_once_with_did_you_mean():
    bad = {
        "optim": {"lrr": 1e-3, "weight_decay": "lots"},
        "mixed_precision": "bf15",
        "epochs": -1,
        "dat": {},
        "eval": {"early_stopping_patience": 0},
    }
    with pytest.raises(ConfigError) as e:
        from_dict(TrainSettings, bad, prefix="train.")
    msg = str(e.value)
    assert msg.startswith("6 problems")
    assert "train.optim.lrr: unknown key. Did you mean 'lr'?" in msg
    assert "train.optim.weight_decay: expected a number, got 'lots'" in msg
    assert "Did you mean 'bf16'?" in msg
    assert "train.dat: unknown key. Did you mean 'data'?" in msg
    assert "train.epochs must be > 0" in msg
    assert "train.eval.early_stopping_patience must be >= 1" in msg


def test_strings_from_the_command_line_are_coerced_to_the_field_types():
    s = from_dict(
        TrainSettings,
        {"optim": {"lr": "3e-5", "betas": "0.8,0.99", "max_grad_norm": "null"},
         "seed": "7", "gradient_checkpointing": "yes", "data": {"batch_size": 16.0}},
    )
    assert s.optim.lr == 3e-5 and s.optim.betas == (0.8, 0.99) and s.optim.max_grad_norm is None
    assert s.seed == 7 and s.gradient_checkpointing is True and s.data.batch_size == 16
    with pytest.raises(ConfigError, match="seed: expected an integer, got '7.5'"):
        from_dict(TrainSettings, {"seed": "7.5"})


def test_a_bare_no_is_mixed_precision_no():
    """YAML 1.1 reads `mixed_precision: no` (and the override mixed_precision=no) as false."""
    assert from_dict(TrainSettings, yaml.safe_load("mixed_precision: no")).mixed_precision == "no"
    overridden = apply_overrides({"mixed_precision": "auto"}, parse_overrides(["mixed_precision=no"]))
    assert from_dict(TrainSettings, overridden).mixed_precision == "no"
    with pytest.raises(ConfigError, match="gradient_checkpointing"):  # other fields keep their types
        from_dict(TrainSettings, {"gradient_checkpointing": "maybe"})


def test_direct_construction_is_validated_too():
    with pytest.raises(ConfigError, match="grad_accum_steps must be >= 1"):
        TrainSettings(grad_accum_steps=0)


def test_overrides_parse_as_yaml_scalars_and_nest():
    ov = parse_overrides(["optim.lr=2e-5", "data.batch_size=64", "eval.metric=f1", "cpu=true"])
    data = apply_overrides({"optim": {"weight_decay": 0.1}}, ov)
    s = from_dict(TrainSettings, data)
    assert (s.optim.lr, s.optim.weight_decay, s.data.batch_size, s.eval.metric, s.cpu) == (
        2e-5, 0.1, 64, "f1", True)
    with pytest.raises(ConfigError, match="expected key.sub=value"):
        parse_overrides(["optim.lr", "=3", "a..b=1"])
    with pytest.raises(ConfigError, match="seed is a value"):
        apply_overrides({"seed": 1}, parse_overrides(["seed.x=2"]))


def test_round_trip_through_yaml():
    s = from_dict(TrainSettings, {"optim": {"betas": [0.9, 0.98]}, "schedule": {"name": "cosine"}})
    again = from_dict(TrainSettings, yaml.safe_load(yaml.safe_dump(to_dict(s))))
    assert again == s


def test_metric_direction_defaults():
    assert not from_dict(TrainSettings, {"eval": {"metric": "loss"}}).eval.higher_is_better
    assert from_dict(TrainSettings, {"eval": {"metric": "f1"}}).eval.higher_is_better
    assert not from_dict(TrainSettings, {"eval": {"metric": "f1", "greater_is_better": False}}).eval.higher_is_better
