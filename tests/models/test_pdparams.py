"""The restricted .pdparams reader: what paddle.save writes loads; anything else is refused."""

from __future__ import annotations

import collections
import copyreg
import io
import os
import pickle
import re
from pathlib import Path

import numpy as np
import pytest

from nlp._common import DataError
from nlp.models import _pdparams
from nlp.models._pdparams import NAME_TABLE_KEY, UNPACK_INFO_KEY, UnsafePickleError, load_pdparams


def _paddle_layout(state: dict[str, np.ndarray]) -> dict:
    """What paddle's `_build_saved_state_dict` produces: the arrays, then the name table last."""
    saved = dict(state)
    saved[NAME_TABLE_KEY] = {k: f"param_{i}.w_0" for i, k in enumerate(state)}
    return saved


def _write(path: Path, obj, protocol: int = 4) -> Path:
    with open(path, "wb") as f:
        pickle.dump(obj, f, protocol=protocol)
    return path


@pytest.fixture
def state() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {
        "embeddings.word_embeddings.weight": rng.standard_normal((7, 4)).astype(np.float32),
        "encoder.layers.0.linear1.weight": rng.standard_normal((4, 6)).astype(np.float32),
        "encoder.layers.0.linear1.bias": rng.standard_normal(6).astype(np.float16),
        "pooler.dense.bias": np.zeros(4, np.float64),
    }


@pytest.mark.parametrize("protocol", [2, 3, 4])
def test_reads_what_paddle_save_writes(tmp_path, state, protocol):
    # Protocols 2/3 route bytes through _codecs.encode(..., "latin1"): that path must work too.
    path = _write(tmp_path / "model_state.pdparams", _paddle_layout(state), protocol)
    loaded = load_pdparams(path)
    assert NAME_TABLE_KEY not in loaded
    assert list(loaded) == list(state)
    for key, value in state.items():
        assert loaded[key].dtype == value.dtype
        np.testing.assert_array_equal(loaded[key], value)


def test_reads_numpy1_module_names(tmp_path, state):
    """Checkpoints written under numpy 1.x name numpy.core.multiarray, not numpy._core."""
    data = pickle.dumps(_paddle_layout(state), protocol=2)  # GLOBAL opcodes: "module\nname\n"
    old = re.sub(rb"numpy\._core\.multiarray\n", b"numpy.core.multiarray\n", data)
    assert b"numpy.core.multiarray\n_reconstruct" in old
    path = tmp_path / "old.pdparams"
    path.write_bytes(old)
    loaded = load_pdparams(path)
    np.testing.assert_array_equal(loaded["encoder.layers.0.linear1.weight"], state["encoder.layers.0.linear1.weight"])


def test_reassembles_big_parameter_slices(tmp_path):
    """paddle's _unpack_saved_dict splits big arrays into name@@.i flat slices (protocol 2/3)."""
    full = np.arange(24, dtype=np.float32).reshape(4, 6)
    flat = full.reshape(-1)
    saved = {
        "small": np.ones(3, np.float32),
        "big@@.0": flat[:10],
        "big@@.1": flat[10:20],
        "big@@.2": flat[20:],
        UNPACK_INFO_KEY: {"big": {"OriginShape": (4, 6), "slices": ["big@@.0", "big@@.1", "big@@.2"]}},
    }
    loaded = load_pdparams(_write(tmp_path / "big.pdparams", _paddle_layout(saved), 2))
    assert set(loaded) == {"small", "big"}
    np.testing.assert_array_equal(loaded["big"], full)


def test_incomplete_big_parameter_is_an_error(tmp_path):
    saved = {"big@@.0": np.ones(4, np.float32),
             UNPACK_INFO_KEY: {"big": {"OriginShape": (2, 4), "slices": ["big@@.0"]}}}
    with pytest.raises(DataError, match="big"):
        load_pdparams(_write(tmp_path / "big.pdparams", saved, 2))


class _FakeTensor:
    """Stands for a paddle Tensor pickled by paddle 2.1's generic `_pickle_save`."""

    def __init__(self, name: str, data: np.ndarray) -> None:
        self.name, self.data = name, data


def test_reads_paddle21_name_array_tuples(tmp_path):
    # paddle's reduce_varbase: (tuple, ((name, ndarray),)) -> a builtins.tuple global + REDUCE.
    buf = io.BytesIO()
    pickler = pickle.Pickler(buf, 4)
    pickler.dispatch_table = copyreg.dispatch_table.copy()
    pickler.dispatch_table[_FakeTensor] = lambda t: (tuple, ((t.name, t.data),))
    weight = np.arange(6, dtype=np.float32).reshape(2, 3)
    pickler.dump({"linear.weight": _FakeTensor("linear_0.w_0", weight)})
    assert b"builtins" in buf.getvalue()
    path = tmp_path / "t.pdparams"
    path.write_bytes(buf.getvalue())
    np.testing.assert_array_equal(load_pdparams(path)["linear.weight"], weight)


def test_reads_ordered_dict(tmp_path, state):
    loaded = load_pdparams(_write(tmp_path / "o.pdparams", collections.OrderedDict(state)))
    assert list(loaded) == list(state)


class _RunsCode:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_refuses_os_system_and_never_runs_it(tmp_path, state):
    marker = tmp_path / "pwned"
    evil = {**state, "encoder.layers.0.linear1.weight": _RunsCode(marker)}
    path = _write(tmp_path / "evil.pdparams", evil)
    with pytest.raises(UnsafePickleError) as err:
        load_pdparams(path)
    message = str(err.value)
    assert "system" in message and str(path) in message
    assert not marker.exists()


@pytest.mark.parametrize("payload", [
    (eval, ("1+1",)),
    (getattr, (int, "mro")),
    (np.load, ("x.npy",)),
    (collections.Counter, ("abc",)),
])
def test_refuses_other_globals(tmp_path, payload):
    class Evil:
        def __reduce__(self):
            return payload

    path = _write(tmp_path / "evil.pdparams", {"w": Evil()})
    with pytest.raises(UnsafePickleError, match="refusing to load global"):
        load_pdparams(path)


def test_refuses_non_latin1_codecs_encode(tmp_path):
    import _codecs

    class Evil:
        def __reduce__(self):
            return (_codecs.encode, (b"x", "zlib_codec"))

    with pytest.raises(UnsafePickleError, match="latin1"):
        load_pdparams(_write(tmp_path / "evil.pdparams", {"w": Evil()}, 2))


def test_refuses_persistent_ids(tmp_path):
    class TorchLike(pickle.Pickler):
        def persistent_id(self, obj):
            return ("storage", 0) if isinstance(obj, np.ndarray) else None

    buf = io.BytesIO()
    TorchLike(buf, 2).dump({"w": np.ones(2)})
    path = tmp_path / "torch.pdparams"
    path.write_bytes(buf.getvalue())
    with pytest.raises(UnsafePickleError, match="persistent id"):
        load_pdparams(path)


def test_truncated_file_names_the_file(tmp_path, state):
    path = _write(tmp_path / "model_state.pdparams", _paddle_layout(state))
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    with pytest.raises(DataError, match=re.escape(str(path))) as err:
        load_pdparams(path)
    assert "truncated" in str(err.value)


@pytest.mark.parametrize("content", [b"", b"not a pickle at all", b"\x80\x04\x95garbage"])
def test_corrupt_file_names_the_file(tmp_path, content):
    path = tmp_path / "bad.pdparams"
    path.write_bytes(content)
    with pytest.raises(DataError, match=re.escape(str(path))):
        load_pdparams(path)


def test_missing_file(tmp_path):
    with pytest.raises(DataError, match="no such file"):
        load_pdparams(tmp_path / "absent.pdparams")


@pytest.mark.parametrize("obj, match", [
    ({"model": {"w": np.ones(2)}, "epoch": 3}, "not an array"),  # a nested training checkpoint
    ([np.ones(2)], "expected a dict"),
    ({"w": np.array(["a", "b"])}, "not a numeric array"),
    ({1: np.ones(2)}, "not a string"),
])
def test_refuses_content_that_is_not_a_flat_state_dict(tmp_path, obj, match):
    with pytest.raises(DataError, match=match):
        load_pdparams(_write(tmp_path / "x.pdparams", obj))


def test_object_arrays_are_refused(tmp_path):
    with pytest.raises(DataError):
        load_pdparams(_write(tmp_path / "x.pdparams", {"w": np.array([1, "a"], dtype=object)}))


def test_module_never_calls_pickle_load_directly():
    source = Path(_pdparams.__file__).read_text()
    assert "pickle.load(" not in source and "pickle.loads(" not in source
