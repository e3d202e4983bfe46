"""Read pickles without running code: an `Unpickler` that admits only named globals.

Unpickling calls whatever globals a file names, so `pickle.load` on a downloaded file can run
any program. `RestrictedUnpickler` refuses every global outside its allow-list by name, before
anything is called, and refuses persistent ids (torch and other framework checkpoints).

Two users: the `.pdparams` reader (`nlp.models._pdparams`, an allow-list of numpy array
reconstruction) and `load_plain_pickle` below (no globals at all: only what the pickle opcodes
build by themselves, then checked against the types the caller expects), which reads the
datasets that packages ship as pickles.

This module is foundation: it imports nothing of `nlp` but `nlp._common`.
"""

from __future__ import annotations

import os
import pickle
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from nlp._common import DataError

__all__ = ["UnsafePickleError", "RestrictedUnpickler", "READ_ERRORS", "load_plain_pickle", "check_plain_types"]


class UnsafePickleError(DataError):
    """A pickle names a global outside the allow-list: it is refused, never executed."""


class RestrictedUnpickler(pickle.Unpickler):
    """`find_class` admits only `allowed` ((module, name) -> object); errors name the file.

    `what` says what the file should hold, for the error message ("a .pdparams file holds only
    numpy arrays and plain containers").
    """

    def __init__(self, file: Any, source: str, allowed: Mapping[tuple[str, str], Any], *,
                 what: str, encoding: str = "ASCII") -> None:
        super().__init__(file, encoding=encoding)
        self._source = source
        self._allowed = dict(allowed)
        self._what = what

    def find_class(self, module: str, name: str) -> Any:
        try:
            return self._allowed[(module, name)]
        except KeyError:
            admitted = ", ".join(sorted(f"{m}.{n}" for m, n in self._allowed)) or "none"
            raise UnsafePickleError(
                f"{self._source}: refusing to load global '{module}.{name}'. {self._what} "
                f"(admitted globals: {admitted}); this file could run code when unpickled. Do not "
                "load it with pickle either; get the file again from a trusted source."
            ) from None

    def persistent_load(self, pid: Any) -> Any:
        raise UnsafePickleError(
            f"{self._source}: persistent id {pid!r} found; {self._what[0].lower()}{self._what[1:]} "
            "(a torch or other framework checkpoint is not)."
        )


# What the readers catch from a truncated or corrupt pickle, turned into a DataError.
READ_ERRORS = (pickle.UnpicklingError, EOFError, ValueError, TypeError, IndexError, KeyError,
               AttributeError, OverflowError, MemoryError, UnicodeDecodeError)


def check_plain_types(obj: Any, types: tuple[type, ...], source: str, where: str = "the pickle") -> None:
    """Raise DataError unless `obj` and everything inside it (lists, tuples) is one of `types`."""
    stack = [(obj, where)]
    while stack:
        value, at = stack.pop()
        if type(value) not in types:  # exact types: no subclass of str or int slips through
            names = ", ".join(t.__name__ for t in types)
            raise DataError(f"{source}: {at} is a {type(value).__name__}; this file may hold only {names}.")
        if isinstance(value, (list, tuple)):
            stack.extend((v, f"{at}[{i}]") for i, v in enumerate(value))


def load_plain_pickle(path: str | os.PathLike, types: tuple[type, ...] = (tuple, list, str, int)) -> Any:
    """Unpickle a file that holds only plain data of `types` (default: tuples, lists, str, int).

    No global is admitted, so no callable can be reached; the result is then checked
    recursively against `types`. Raises UnsafePickleError for a pickle that names a global and
    DataError (naming the file) for a truncated or corrupt one or for any other type inside.
    """
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: no such file.")
    if path.stat().st_size == 0:
        raise DataError(f"{path}: the file is empty.")
    what = f"This file may hold only {', '.join(t.__name__ for t in types)}"
    with open(path, "rb") as f:
        try:
            obj = RestrictedUnpickler(f, str(path), {}, what=what, encoding="utf-8").load()
        except UnsafePickleError:
            raise
        except READ_ERRORS as err:
            raise DataError(f"{path}: not a readable pickle ({type(err).__name__}: {err}); it may be "
                            "truncated or corrupt: reinstall the package that ships it.") from err
    check_plain_types(obj, types, str(path))
    return obj
