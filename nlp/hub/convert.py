"""Injected converters for sources that are not in the transformers format.

The hub knows no model class, so it cannot read a `.pdparams` file. `nlp.auto` registers the
models layer's converter (`register_converter("paddle", fn)`); the hub calls `fn(src_dir, dst_dir)`
once per source snapshot, into a temp folder renamed into place, under a file lock, and serves the
converted folder from the cache ever after (offline included).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from collections.abc import Callable
from pathlib import Path

from filelock import FileLock

from nlp._common import HubError

__all__ = ["convert_once", "get_converter", "is_converted", "register_converter"]

logger = logging.getLogger(__name__)

Converter = Callable[[Path, Path], None]
_CONVERTERS: dict[str, Converter] = {}
_MARKER = ".nlp-converted.json"  # written last: its presence means the folder is complete


def register_converter(fmt: str, fn: Converter) -> None:
    """Register `fn(src_dir, dst_dir)` converting a `fmt` snapshot into a transformers folder."""
    if not callable(fn):
        raise TypeError(f"converter for {fmt!r} must be callable, got {type(fn).__name__}")
    _CONVERTERS[fmt] = fn


def get_converter(fmt: str) -> Converter:
    try:
        return _CONVERTERS[fmt]
    except KeyError:
        raise HubError(
            f"this model's source is in the {fmt!r} format and no converter for it is registered. "
            f"Load it through nlp.Auto* classes (importing nlp.auto registers the converters), or call "
            f"nlp.hub.register_converter({fmt!r}, fn) with fn(src_dir, dst_dir)."
        ) from None


def is_converted(dst: Path) -> bool:
    return (dst / _MARKER).is_file()


def convert_once(fmt: str, src_dir: Path, dst: Path) -> Path:
    """Convert `src_dir` into `dst` unless already done; safe under concurrent processes."""
    if is_converted(dst):
        return dst
    fn = get_converter(fmt)
    dst.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(dst.parent / f".{dst.name}.lock")):
        if is_converted(dst):
            return dst
        tmp = dst.parent / f".{dst.name}.tmp-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        try:
            logger.info("converting %s snapshot %s", fmt, src_dir)
            fn(Path(src_dir), tmp)
            (tmp / _MARKER).write_text(json.dumps({"format": fmt, "source": str(src_dir)}), encoding="utf-8")
            if dst.exists():  # a folder left by a crash before the marker was written
                shutil.rmtree(dst)
            os.replace(tmp, dst)
        except BaseException as err:
            shutil.rmtree(tmp, ignore_errors=True)
            if isinstance(err, HubError) or not isinstance(err, Exception):
                raise
            raise HubError(f"converting the {fmt} snapshot {src_dir} failed: {type(err).__name__}: {err}") from err
    return dst
