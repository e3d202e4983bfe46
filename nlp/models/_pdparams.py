"""Read a PaddlePaddle `.pdparams` file without running arbitrary code.

A `.pdparams` file is a Python pickle. Unpickling calls whatever globals the file names, so
`pickle.load` on a downloaded checkpoint can run any program. This module reads it with an
`Unpickler` subclass that admits only the globals `paddle.save` really writes and refuses every
other one by name before anything is called.

What `paddle.save(layer.state_dict(), path)` writes (Paddle 2.x/3.x,
`python/paddle/framework/io.py` `_legacy_save` and `io_utils.py` `_unpack_saved_dict`):

- pickle protocol 4 by default (2..4 allowed; protocols 2/3 encode `bytes` through
  `_codecs.encode(str, "latin1")`);
- a dict of structured name (`"ernie.encoder.layers.0.linear1.weight"`) -> `numpy.ndarray`,
  each array reconstructed through `numpy.core.multiarray._reconstruct` (numpy 1.x) or
  `numpy._core.multiarray._reconstruct` (numpy 2.x), `numpy.ndarray` and `numpy.dtype`;
- an entry `"StructuredToParameterName@@"`: structured name -> Paddle's internal parameter name
  (`"linear_3.w_0"`), which is bookkeeping and is dropped here;
- with protocol 2/3 only, arrays above 2**30 bytes are split into `"<name>@@.0"`,
  `"<name>@@.1"`, ... flat slices, described by an entry `"UnpackBigParamInfor@@"`:
  name -> {"OriginShape": shape, "slices": [slice names]}; they are put back together here;
- Paddle 2.1's generic pickler (`_pickle_save`, used for objects that are not a plain state
  dict) writes each tensor as a tuple `(parameter name, ndarray)` built by `builtins.tuple`;
  such values are unwrapped to the array.

bfloat16 parameters are stored by Paddle as `uint16` arrays; they are returned as they are and
the caller decides (the converter reinterprets them as bfloat16).
"""

from __future__ import annotations

import codecs
import collections
import logging
import os
from pathlib import Path
from typing import Any, Callable

import numpy as np

from nlp._common import DataError
from nlp._safe_pickle import READ_ERRORS, RestrictedUnpickler, UnsafePickleError

__all__ = ["UnsafePickleError", "load_pdparams", "NAME_TABLE_KEY", "UNPACK_INFO_KEY"]

logger = logging.getLogger(__name__)

NAME_TABLE_KEY = "StructuredToParameterName@@"
UNPACK_INFO_KEY = "UnpackBigParamInfor@@"


def _reconstruct(subtype: Any, shape: Any, dtype: Any) -> np.ndarray:
    """numpy's `_reconstruct`, limited to plain ndarrays (no subclass can be smuggled in)."""
    if subtype is not np.ndarray:
        raise UnsafePickleError(f"numpy _reconstruct called with subtype {subtype!r}, not numpy.ndarray")
    return np.ndarray.__new__(np.ndarray, shape, dtype)


def _latin1_encode(obj: Any, encoding: str = "utf-8", errors: str = "strict") -> bytes:
    """`_codecs.encode` as protocols 2/3 use it for bytes: only str -> latin-1 bytes."""
    if not isinstance(obj, str) or codecs.lookup(encoding).name != "iso8859-1":
        raise UnsafePickleError(f"_codecs.encode called with encoding {encoding!r}; only latin1 is admitted")
    return obj.encode("latin1", errors)


def _scalar(dtype: Any, data: Any = None) -> Any:
    """numpy's `multiarray.scalar`, limited to non-object dtypes."""
    if not isinstance(dtype, np.dtype) or dtype.hasobject or not isinstance(data, bytes):
        raise UnsafePickleError(f"numpy scalar with dtype {dtype!r} is not admitted")
    return np.frombuffer(data, dtype=dtype, count=1)[0]


# (module, name) -> the object the restricted unpickler hands back. Nothing else is importable.
_ALLOWED: dict[tuple[str, str], Callable[..., Any] | type] = {
    ("numpy.core.multiarray", "_reconstruct"): _reconstruct,
    ("numpy._core.multiarray", "_reconstruct"): _reconstruct,
    ("numpy.core.multiarray", "scalar"): _scalar,
    ("numpy._core.multiarray", "scalar"): _scalar,
    ("numpy", "ndarray"): np.ndarray,
    ("numpy", "dtype"): np.dtype,
    ("collections", "OrderedDict"): collections.OrderedDict,
    ("builtins", "tuple"): tuple,  # Paddle 2.1's (name, ndarray) tensor form
    ("_codecs", "encode"): _latin1_encode,  # bytes under pickle protocols 2 and 3
}


_WHAT = "A .pdparams file holds only numpy arrays and plain containers"


def _unpickle(path: Path) -> Any:
    size = path.stat().st_size
    if size == 0:
        raise DataError(f"{path}: the file is empty (an interrupted download or save?).")
    with open(path, "rb") as f:
        try:
            # latin1 as paddle.load uses: numpy arrays pickled by Python 2 carry str payloads.
            return RestrictedUnpickler(f, str(path), _ALLOWED, what=_WHAT, encoding="latin1").load()
        except UnsafePickleError:
            raise
        except READ_ERRORS as err:
            raise DataError(
                f"{path}: not a readable .pdparams pickle ({type(err).__name__}: {err}). The file "
                f"is {size} bytes; it may be truncated or corrupt: download or save it again."
            ) from err


def _repack_big_params(state: dict, path: Path) -> None:
    """Undo `_unpack_saved_dict`: join `name@@.i` slices back into `name` (in place)."""
    info = state.pop(UNPACK_INFO_KEY)
    if not isinstance(info, dict):
        raise DataError(f"{path}: '{UNPACK_INFO_KEY}' is a {type(info).__name__}, expected a dict.")
    for name, entry in info.items():
        try:
            slices = [state.pop(part) for part in entry["slices"]]
            shape = tuple(int(d) for d in entry["OriginShape"])
        except (KeyError, TypeError) as err:
            raise DataError(f"{path}: slices of big parameter {name!r} are incomplete ({err}).") from err
        joined = np.concatenate([np.asarray(s).reshape(-1) for s in slices])
        if joined.size != int(np.prod(shape)):
            raise DataError(
                f"{path}: big parameter {name!r} has {joined.size} elements in its slices, "
                f"its recorded shape {shape} needs {int(np.prod(shape))}."
            )
        state[name] = joined.reshape(shape)


def load_pdparams(path: str | os.PathLike) -> dict[str, np.ndarray]:
    """Load a `paddle.save`d state dict as {structured name: numpy array}, safely.

    Refuses (UnsafePickleError) any pickle naming a global other than numpy array/dtype/scalar
    reconstruction and plain containers; raises DataError naming the file for truncated or
    corrupt files and for content that is not a flat name -> array dict.
    """
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: no such file.")
    obj = _unpickle(path)
    if not isinstance(obj, dict):
        raise DataError(
            f"{path}: holds a {type(obj).__name__}, expected a dict of parameter name -> array "
            "(what paddle.save(model.state_dict(), path) writes)."
        )
    state = dict(obj)
    name_table = state.pop(NAME_TABLE_KEY, None)
    if name_table is not None and not isinstance(name_table, dict):
        raise DataError(f"{path}: '{NAME_TABLE_KEY}' is a {type(name_table).__name__}, expected a dict.")
    if UNPACK_INFO_KEY in state:
        _repack_big_params(state, path)

    out: dict[str, np.ndarray] = {}
    for key, value in state.items():
        if not isinstance(key, str):
            raise DataError(f"{path}: parameter name {key!r} is not a string.")
        if isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], str):
            value = value[1]  # Paddle 2.1: (parameter name, ndarray)
        if not isinstance(value, np.ndarray):
            raise DataError(
                f"{path}: entry {key!r} is a {type(value).__name__}, not an array. Only a flat "
                "model state dict is supported (not an optimizer state or a nested checkpoint "
                "such as {'model': ..., 'opt': ...}): save model.state_dict() on its own."
            )
        if value.dtype.hasobject or value.dtype.kind not in "biuf":
            raise DataError(f"{path}: entry {key!r} has dtype {value.dtype}, not a numeric array.")
        out[key] = value
    logger.debug("read %d arrays from %s", len(out), path)
    return out
