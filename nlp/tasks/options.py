"""A task's call options: the knobs a caller sets per call (how many labels, the longest answer,
a threshold), declared once on the task's spec (`TaskSpec.call_options`) and turned into
everything that takes them::

    call_options = (CallOption("top_k", int, 1, "labels per text, best first", minimum=1,
                               nullable=True, uses=("predict", "serve")),)

- `nlp predict` / `nlp evaluate` get a flag per option (`--top-k`), added when the command is
  parsed (nlp/commands/_task_options.py), and hand the given values to the spec
  (`spec.predict(pipe, records, **options)`; for "evaluate", the task settings of the run);
- the model server checks `parameters` against them and writes them into its OpenAPI document
  (`ServingAdapter.options`, nlp/tasks/serving.py);
- `nlp tasks` lists them.

`uses` says which calls take the option: "predict" (`nlp predict`, passed to the spec's
`predict`), "serve" (the server's `parameters` of the task's /predict route) and "evaluate"
(`nlp evaluate`: a field of the task's settings that scoring reads, such as QA's doc_stride).
`maximum` is a number, or "max_length": bounded by the model's window (known when it is loaded).
An option of type `list` takes a list of non-blank strings (zero-shot's candidate labels); its
`minimum` and `maximum` bound how many, and a flag takes them separated by commas.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from nlp._common import ConfigError, did_you_mean

__all__ = ["CallOption", "OptionError", "USES", "check_options"]

USES = ("predict", "serve", "evaluate")
_TYPES = (int, float, bool, str, list)  # list: of non-blank strings


class OptionError(ConfigError):
    """A value a call option does not take; the message names the option and what it takes."""


@dataclass(frozen=True)
class CallOption:
    name: str  # a Python identifier: the keyword, the parameter's name; the flag is --name-with-dashes
    type: type  # int, float, bool, str, or list (of strings; the bounds count its items)
    default: Any  # what the task does when the option is not given (shown in help texts)
    help: str  # one line: what it does
    minimum: float | None = None
    maximum: float | str | None = None  # a number, or "max_length" (the model's window in tokens)
    nullable: bool = False  # null (None) is a value too ("top_k": null = every label)
    uses: tuple[str, ...] = ("predict", "serve")
    why_maximum: str = ""  # where the maximum comes from, for the error (" (the span search's width)")

    def __post_init__(self) -> None:
        if not self.name.isidentifier():
            raise ValueError(f"CallOption name {self.name!r} must be a Python identifier (it becomes a keyword)")
        if self.type not in _TYPES:
            raise ValueError(f"CallOption {self.name!r}: type must be one of int, float, bool, str, list; "
                             f"got {self.type!r}")
        bad = [u for u in self.uses if u not in USES]
        if bad or not self.uses:
            raise ValueError(f"CallOption {self.name!r}: uses must be a non-empty subset of {USES}; got {self.uses!r}")
        if isinstance(self.maximum, str) and self.maximum != "max_length":
            raise ValueError(f"CallOption {self.name!r}: maximum must be a number or 'max_length', got {self.maximum!r}")

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    def bound(self, max_length: int | None) -> float | None:
        """The largest value, with the model's window known (None: unbounded)."""
        if self.maximum == "max_length":
            return max_length
        return self.maximum  # type: ignore[return-value]

    def check(self, value: Any, *, max_length: int | None = None, where: str | None = None) -> Any:
        """`value` when the option takes it, else OptionError naming `where` (default: the option)."""
        where = where or self.name
        if value is None and self.nullable:
            return value
        maximum = self.bound(max_length)
        if self.type is bool:
            if not isinstance(value, bool):
                raise OptionError(f"{where} must be true or false, got {_short(value)}")
            return value
        if self.type is str:
            if not isinstance(value, str):
                raise OptionError(f"{where} must be a string, got {_short(value)}")
            return value
        if self.type is list:
            return self._check_list(value, maximum, where)
        kind = "an integer" if self.type is int else "a number"
        ok_type = (isinstance(value, int) if self.type is int else isinstance(value, (int, float))) \
            and not isinstance(value, bool)
        if not ok_type or (self.minimum is not None and value < self.minimum) \
                or (maximum is not None and value > maximum) or value != value:  # NaN
            low = f" >= {_num(self.minimum)}" if self.minimum is not None else ""
            high = f"{' and' if low else ''} <= {_num(maximum)}{self.why_maximum}" if maximum is not None else ""
            none = " or null" if self.nullable else ""
            raise OptionError(f"{where} must be {kind}{low}{high}{none}, got {_short(value)}")
        return self.type(value)

    def _check_list(self, value: Any, maximum: float | None, where: str) -> list[str]:
        low = int(self.minimum) if self.minimum is not None else 0
        count = f"{low} to {int(maximum)}" if maximum is not None else f"{low} or more"
        if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
            raise OptionError(f"{where} must be a list of {count} non-blank strings, got {_short(value)}")
        if len(value) < low or (maximum is not None and len(value) > maximum):
            raise OptionError(f"{where} must be a list of {count} non-blank strings{self.why_maximum}, "
                              f"got {len(value)}")
        return list(value)

    def describe(self) -> str:
        """`--top-k INT (default 1, >= 1): labels per text`: one line for help texts and `nlp tasks`."""
        bounds = []
        if self.minimum is not None:
            bounds.append(f">= {_num(self.minimum)}")
        if self.maximum is not None:
            bounds.append(f"<= {self.maximum if isinstance(self.maximum, str) else _num(self.maximum)}")
        default = "null" if self.default is None else str(self.default).lower() if self.type is bool else self.default
        extra = ", ".join([f"default {default}", *bounds])
        return f"{self.name} ({self.type.__name__}, {extra}): {self.help}"

    def json_schema(self) -> dict[str, Any]:
        """The option as a JSON schema (the server's OpenAPI document)."""
        kind = {int: "integer", float: "number", bool: "boolean", str: "string", list: "array"}[self.type]
        schema: dict[str, Any] = {"type": [kind, "null"] if self.nullable else kind, "description": self.help,
                                  "default": self.default}
        if self.type is list:  # the bounds count the items
            schema["items"] = {"type": "string", "minLength": 1}
            if self.minimum is not None:
                schema["minItems"] = int(self.minimum)
            if isinstance(self.maximum, (int, float)):
                schema["maxItems"] = int(self.maximum)
            return schema
        if self.minimum is not None:
            schema["minimum"] = self.minimum
        if isinstance(self.maximum, (int, float)):
            schema["maximum"] = self.maximum
        return schema


def check_options(options: tuple[CallOption, ...], values: Mapping[str, Any], *, use: str,
                  max_length: int | None = None, task: str = "", where: str = "{name}") -> dict[str, Any]:
    """The given `values` checked against the declared `options` that `use` takes: OptionError
    for an unknown name (naming the valid ones) or a value out of its type or bounds. `where`
    formats each option's name in messages ("--{flag}", "parameters.{name}")."""
    declared = {o.name: o for o in options if use in o.uses}
    out = {}
    for name, value in values.items():
        if name not in declared:
            valid = ", ".join(where.format(name=n, flag=declared[n].flag) for n in declared) or "none"
            raise OptionError(f"unknown option {name!r} for {task or 'this task'} (valid: {valid})"
                              f"{did_you_mean(name, list(declared))}")
        option = declared[name]
        out[name] = option.check(value, max_length=max_length, where=where.format(name=name, flag=option.flag))
    return out


def _num(x: Any) -> str:
    return f"{x:g}" if isinstance(x, float) else str(x)


def _short(value: Any) -> str:
    import reprlib

    text = reprlib.repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
