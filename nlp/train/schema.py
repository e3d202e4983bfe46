"""The schema engine: typed settings dataclasses built from mappings, every problem at once.

The training settings (`nlp.train.settings`), the fine-tuning recipe (`nlp.train.recipe`) and
the pretraining recipe (`nlp.train.pretrain`) are all plain dataclasses deriving from `Settings`.
This module is the one place that turns a nested mapping (parsed YAML plus command-line
`key.sub=value` overrides) into them::

    data = read_yaml("recipe.yaml", ["train.optim.lr=3e-5"])   # the file, overrides applied
    recipe = from_dict(Recipe, data, source="recipe.yaml")      # or one ConfigError listing all

How every problem is found in one pass (torchtune's `config/_validate.py` habit):
- each value is coerced to its field's type; a wrong type, an unknown key (with a did-you-mean)
  or a non-finite number is recorded under its dotted path (`train.optim.lr`), also inside
  dict and list fields, and the field keeps its default;
- each object is then constructed normally, so its `__post_init__` runs its own checks
  (`Settings.problems`, one `(field, message)` pair per problem); a failed construction is
  recorded and retried without the fields it blamed, so that the enclosing section still gets
  an object, its own checks run too, and the checks that span sections see the good values.

Strings are accepted for numbers and booleans because command-line overrides and some YAML
spellings (`lr: 3e-5` is a *string* in YAML 1.1) arrive as strings.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, Union

import yaml

from nlp._common import ConfigError, did_you_mean
from nlp._settings import Problem, Settings, SettingsError, format_problems

__all__ = [
    "Problem",
    "Settings",
    "SettingsError",
    "format_problems",
    "from_dict",
    "build",
    "to_dict",
    "parse_overrides",
    "apply_overrides",
    "read_yaml",
]


# --------------------------------------------------------------------------- building


_TRUE = {"true", "yes", "on", "1"}
_FALSE = {"false", "no", "off", "0"}
_NULL = {"null", "none", "~"}


def from_dict(cls: type, data: Any, *, prefix: str = "", source: str | None = None) -> Any:
    """Build dataclass `cls` (e.g. TrainSettings, Recipe) from a nested mapping.

    Raises one ConfigError listing every unknown key (with did-you-mean), every wrong type and
    every bad value, each named by its dotted path (`prefix` is prepended, e.g. "train.");
    `source` (a file name) goes into the first line.
    """
    errors: list[str] = []
    obj = build(cls, data, errors, prefix=prefix, source=source)
    if errors:
        raise ConfigError(format_problems(errors, source or cls.__name__))
    return obj


def build(cls: type, data: Any, errors: list[str], *, prefix: str = "", source: str | None = None) -> Any:
    """`from_dict` that appends its messages to `errors` instead of raising (unless `data` is
    not a mapping at all) and returns a valid object (refused values replaced by their
    defaults), so that a caller can go on with the checks that span sections."""
    if data is None:
        data = {}
    if not isinstance(data, Mapping):  # nothing else can be checked
        keys = ", ".join(f.name for f in dataclasses.fields(cls) if f.init)
        raise ConfigError(f"{prefix.rstrip('.') or source or cls.__name__}: expected a mapping of "
                          f"{keys}; got {type(data).__name__} {data!r}")
    return _build(cls, data, prefix, errors)


def _build(cls: type, data: Mapping[str, Any], prefix: str, errors: list[str]) -> Any:
    hints = typing.get_type_hints(cls)
    fields = [f.name for f in dataclasses.fields(cls) if f.init]
    kwargs: dict[str, Any] = {}
    for key, value in data.items():
        if key not in fields:
            errors.append(f"{prefix}{key}: unknown key.{did_you_mean(str(key), fields)}"
                          f" Valid keys here: {', '.join(fields)}.")
            continue
        before = len(errors)
        coerced = _coerce(value, hints[key], f"{prefix}{key}", errors)
        # A section with bad keys is still kept: its good values matter to later checks.
        if len(errors) == before or dataclasses.is_dataclass(coerced):
            kwargs[key] = coerced
    first = True
    while True:
        try:
            return cls(**kwargs)
        except SettingsError as err:
            if first:  # retries only look for a valid object; what they find is a consequence
                errors.extend(f"{prefix}{p.message}" for p in err.problems)
                first = False
            blamed = {p.field for p in err.problems} & kwargs.keys()
            if not blamed and not kwargs:
                raise TypeError(f"the defaults of {cls.__name__} do not validate: {err}") from None
            for name in blamed or list(kwargs):
                del kwargs[name]


def _coerce(value: Any, tp: Any, key: str, errors: list[str]) -> Any:
    """`value` as type `tp`, or None after appending a message naming `key`."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp is Any:
        return value
    if origin in (Union, types.UnionType):
        if type(None) in args and (value is None or (isinstance(value, str) and value.strip().lower() in _NULL)):
            return None
        (inner,) = [a for a in args if a is not type(None)]  # Optional[X] is the only union used
        return _coerce(value, inner, key, errors)
    if origin is Literal:
        if value is False and "no" in args:  # YAML 1.1 reads a bare `no` (mixed_precision: no) as false
            return "no"
        if value in args:
            return value
        errors.append(f"{key}: {value!r} is not one of {', '.join(map(repr, args))}."
                      f"{did_you_mean(str(value), map(str, args))}")
        return None
    if dataclasses.is_dataclass(tp):
        if isinstance(value, tp):
            return value
        if not isinstance(value, Mapping):
            keys = ", ".join(f.name for f in dataclasses.fields(tp) if f.init)
            errors.append(f"{key}: expected a mapping of {keys}; got {value!r}")
            return None
        return _build(tp, value, f"{key}.", errors)
    if origin is dict:
        if not isinstance(value, Mapping):
            errors.append(f"{key}: expected a mapping (key: value), got {value!r}")
            return None
        before = len(errors)
        value_type = args[1] if args else Any
        out = {str(k): _coerce(v, value_type, f"{key}.{k}", errors) for k, v in value.items()}
        return out if len(errors) == before else None
    if origin in (list, tuple):
        return _coerce_sequence(value, origin, args, key, errors)
    if tp is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
            return value.strip().lower() in _TRUE
        errors.append(f"{key}: expected true or false, got {value!r}")
        return None
    if tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        number = _number(value)
        if number is not None and math.isfinite(number) and number.is_integer():
            return int(number)
        errors.append(f"{key}: expected an integer, got {value!r}")
        return None
    if tp is float:
        number = _number(value)
        if number is None:
            errors.append(f"{key}: expected a number, got {value!r}")
        elif not math.isfinite(number):  # NaN or inf would train to a NaN model (or not at all)
            errors.append(f"{key}: expected a finite number, got {value!r}")
        else:
            return number
        return None
    if tp is str:
        if isinstance(value, (str, int, float)) and not isinstance(value, bool):
            return str(value)
        hint = " (quote it: YAML reads yes/no/on/off as booleans)" if isinstance(value, bool) else ""
        errors.append(f"{key}: expected a string, got {value!r}{hint}")
        return None
    raise TypeError(f"settings field {key} has an unsupported type {tp!r}")  # a bug in the schema


def _number(value: Any) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def _coerce_sequence(value: Any, origin: type, args: tuple, key: str, errors: list[str]) -> Any:
    if isinstance(value, str):  # a command-line `a,b` (YAML flow syntax `[a, b]` arrives as a list)
        value = [v.strip() for v in value.strip("()[] ").split(",") if v.strip()]
    if origin is tuple:
        if not isinstance(value, (list, tuple)) or len(value) != len(args):
            errors.append(f"{key}: expected {len(args)} values like [0.9, 0.999], got {value!r}")
            return None
        types_ = args
    else:
        if not isinstance(value, (list, tuple)):
            errors.append(f"{key}: expected a list like [a, b], got {value!r}")
            return None
        types_ = args * len(value) if args else (Any,) * len(value)
    before = len(errors)
    out = [_coerce(v, t, f"{key}[{i}]", errors) for i, (v, t) in enumerate(zip(value, types_))]
    if len(errors) != before:
        return None
    return tuple(out) if origin is tuple else out


# --------------------------------------------------------------------------- writing


def to_dict(obj: Any) -> dict[str, Any]:
    """The settings as plain data (tuples become lists), ready for YAML or JSON. Fields that
    are not settings (`init=False`, such as the file a recipe was read from) are left out."""

    def plain(v: Any) -> Any:
        if dataclasses.is_dataclass(v) and not isinstance(v, type):
            return {f.name: plain(getattr(v, f.name)) for f in dataclasses.fields(v) if f.init}
        if isinstance(v, (list, tuple)):
            return [plain(x) for x in v]
        if isinstance(v, dict):
            return {k: plain(x) for k, x in v.items()}
        return v

    return plain(obj)


# --------------------------------------------------------------------------- files and overrides


def parse_overrides(items: Sequence[str]) -> list[tuple[str, Any]]:
    """Parse `key.sub=value` strings. Values are read as YAML scalars (`3`, `true`, `null`,
    `[0.9, 0.99]`); types are then checked against the schema by `from_dict`."""
    out, bad = [], []
    for item in items:
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key or any(not part for part in key.split(".")):
            bad.append(f"{item!r}: expected key.sub=value, e.g. optim.lr=3e-5")
            continue
        try:
            value = yaml.safe_load(raw) if raw.strip() else ""
        except yaml.YAMLError:
            value = raw
        out.append((key, value))
    if bad:
        raise ConfigError(format_problems(bad, "the overrides"))
    return out


def apply_overrides(data: Mapping[str, Any], overrides: Sequence[tuple[str, Any]]) -> dict[str, Any]:
    """Return a deep copy of `data` with each dotted key set (creating nested mappings)."""

    def copy(d: Any) -> Any:
        return {k: copy(v) for k, v in d.items()} if isinstance(d, Mapping) else d

    result = copy(data)
    for key, value in overrides:
        node = result
        *parents, last = key.split(".")
        for i, part in enumerate(parents):
            child = node.get(part)
            if child is None:
                child = node[part] = {}
            elif not isinstance(child, dict):
                raise ConfigError(
                    f"override {key}={value!r}: {'.'.join(parents[: i + 1])} is a value "
                    f"({child!r}), not a section"
                )
            node = child
        node[last] = value
    return result


def read_yaml(path: str | Path, overrides: Sequence[str] = (), *, missing_hint: str = "") -> dict[str, Any]:
    """A YAML recipe file as a mapping, with `key.sub=value` overrides applied.

    Raises ConfigError when the file does not exist (`missing_hint` says where to find one), is
    not YAML, or does not hold a mapping of sections.
    """
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"recipe {str(path)!r} does not exist.{f' {missing_hint}' if missing_hint else ''}")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as err:
        raise ConfigError(f"{path} is not valid YAML: {err}") from None
    except UnicodeDecodeError as err:
        raise ConfigError(f"{path} is not UTF-8 text ({err.reason} at byte {err.start}); "
                          "save the recipe as UTF-8") from None
    if data is not None and not isinstance(data, Mapping):
        raise ConfigError(f"{path}: expected a mapping of sections (section: {{key: value}}), "
                          f"got {type(data).__name__}")
    return apply_overrides(data or {}, parse_overrides(list(overrides)))
