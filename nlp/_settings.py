"""The base of every settings dataclass: constructing one validates it (foundation).

`Settings`, `Problem` and `SettingsError` live here, below every layer, so that a task package
(`nlp.tasks.<task>`) can declare its own typed recipe section (`TaskSettings` subclasses,
nlp/tasks/spec.py) that the schema engine (`nlp.train.schema`, which re-exports these names)
builds and checks like any other section, with a did-you-mean for unknown keys.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

from nlp._common import ConfigError

__all__ = ["Problem", "Settings", "SettingsError", "format_problems"]


class Problem(NamedTuple):
    """One thing wrong with a settings object: the field to blame and a message that starts
    with that field's name (`"lr must be > 0, got 0"`); the engine prefixes the dotted path."""

    field: str
    message: str


def format_problems(messages: Sequence[str], where: str | None = None) -> str:
    """`N problems in WHERE:` and one indented line per problem."""
    head = f"{len(messages)} problem{'s' if len(messages) != 1 else ''}{f' in {where}' if where else ''}:"
    return "\n".join([head, *(f"  - {m}" for m in messages)])


class SettingsError(ConfigError):
    """A settings object refused its values; `problems` lists them, field by field."""

    def __init__(self, problems: Sequence[Problem], where: str | None = None) -> None:
        self.problems = list(problems)
        super().__init__(format_problems([p.message for p in self.problems], where))


class Settings:
    """Base of the settings dataclasses: constructing one validates it.

    A subclass yields its problems from `problems()`; `__post_init__` adds one for every float
    (also inside tuples) that is NaN or infinite, and raises one `SettingsError` naming them all.
    Only checks a section can make alone belong here: ones that need other sections, the file
    system or the hub are the recipe's (`nlp.train.recipe.check_recipe`).
    """

    def problems(self) -> Iterable[Problem]:
        return ()

    def __post_init__(self) -> None:
        found = _validate(self)
        if found:
            raise SettingsError(found, type(self).__name__)


def _validate(obj: Any) -> list[Problem]:
    """The problems of a settings object: non-finite floats first, then its own checks (those
    about a field already refused as non-finite are left out: they would repeat it)."""
    nonfinite = []
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if _has_nonfinite(value):
            what = "hold finite numbers" if isinstance(value, tuple) else "be a finite number"
            nonfinite.append(Problem(f.name, f"{f.name} must {what}, got {value!r}"))
    refused = {p.field for p in nonfinite}
    own = [Problem(*p) for p in obj.problems()]
    return nonfinite + [p for p in own if p.field not in refused]


def _has_nonfinite(value: Any) -> bool:
    if isinstance(value, float):
        return not math.isfinite(value)
    return isinstance(value, tuple) and any(_has_nonfinite(v) for v in value)
