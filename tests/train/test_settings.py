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


def _float_keys(cls, prefix=""):
    """The dotted key of every float setting of `cls` (nested sections included)."""
    import dataclasses
    import typing

    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        tp = hints[f.name]
        if dataclasses.is_dataclass(tp):
            yield from _float_keys(tp, f"{prefix}{f.name}.")
        elif float in (tp, *typing.get_args(tp)) and typing.get_origin(tp) is not tuple:
            yield f"{prefix}{f.name}"  # (the betas pair has its own test)


FLOAT_KEYS = sorted(_float_keys(TrainSettings))


def test_the_float_settings_are_all_found():
    assert {"epochs", "optim.lr", "optim.eps", "optim.max_grad_norm", "schedule.warmup_ratio"} <= set(FLOAT_KEYS)


@pytest.mark.parametrize("key", FLOAT_KEYS)
def test_non_finite_numbers_are_refused_for_every_float_setting(key):
    """Issue 15: train.optim.lr=nan and =inf passed validation; inf trained to a NaN model."""
    for raw in ("nan", "inf", "-inf", ".nan", "-.inf", "1e999"):
        data = apply_overrides({}, parse_overrides([f"{key}={raw}"]))
        with pytest.raises(ConfigError) as err:
            from_dict(TrainSettings, data, prefix="train.")
        assert f"train.{key}: expected a finite number, got" in str(err.value), (raw, str(err.value))
        assert str(err.value).startswith("1 problem")


def test_non_finite_numbers_are_refused_in_tuples_and_on_direct_construction():
    from nlp.train import OptimSettings

    with pytest.raises(ConfigError, match=r"optim.betas\[1\]: expected a finite number, got 'nan'"):
        from_dict(TrainSettings, {"optim": {"betas": "0.9,nan"}})
    with pytest.raises(ConfigError, match="lr must be a finite number, got inf"):
        OptimSettings(lr=float("inf"))
    with pytest.raises(ConfigError) as err:
        OptimSettings(lr=float("-inf"), betas=(0.9, float("nan")))
    msg = str(err.value)  # each field once: "lr must be > 0" would only repeat it
    assert msg.startswith("2 problems in OptimSettings") and "lr must be > 0" not in msg
    assert "betas must hold finite numbers, got (0.9, nan)" in msg


def test_settings_are_constructed_normally_and_bad_values_do_not_hide_others():
    """Each section is built by its constructor (its own checks run); a section whose values
    were refused still reports the checks that involve its other fields."""
    bad = {"data": {"batch_size": 0, "batching": "packed", "num_workers": -1, "shuffle": "no"},
           "max_steps": 0, "epochs": 0}
    with pytest.raises(ConfigError) as err:
        from_dict(TrainSettings, bad)
    msg = str(err.value)
    for part in ("data.batch_size must be >= 1", "data.batching=packed needs pack_max_length",
                 "data.num_workers must be >= 0", "max_steps must be >= 1"):
        assert part in msg, msg
    assert msg.startswith("4 problems")
