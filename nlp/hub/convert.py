"""Converters for sources that are not in the transformers format, passed in by the caller.

The hub knows no model class, so it cannot read a `.pdparams` file. The caller hands it the
converters: `download(name, converters={"paddle": fn})`, which `nlp.auto` (`nlp.auto.CONVERTERS`,
used by every Auto class) and `nlp hub download` do. Nothing is registered as a side effect of an
import, so a download behaves the same whatever the interpreter imported before. A program that
wants a converter for every call may still say so once with `register_converter(fmt, fn)`.

The hub calls `fn(src_dir, dst_dir)` once per source snapshot, into a temp folder renamed into
place, under a file lock, and serves the converted folder from the cache ever after (offline
included, and then without needing the converter).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from pathlib import Path

from filelock import FileLock

from nlp._common import HubError, atomic_directory

__all__ = ["Converter", "convert_once", "get_converter", "is_converted", "register_converter"]

logger = logging.getLogger(__name__)

Converter = Callable[[Path, Path], None]
_CONVERTERS: dict[str, Converter] = {}
_MARKER = ".nlp-converted.json"  # written last: its presence means the folder is complete


def register_converter(fmt: str, fn: Converter) -> None:
    """Use `fn(src_dir, dst_dir)` for every `fmt` snapshot this process downloads (a `converters=`
    argument of `download` takes precedence)."""
    if not callable(fn):
        raise TypeError(f"converter for {fmt!r} must be callable, got {type(fn).__name__}")
    _CONVERTERS[fmt] = fn


def get_converter(fmt: str, converters: Mapping[str, Converter] | None = None) -> Converter:
    """The converter for `fmt`: from `converters` (the caller's), else one registered explicitly."""
    fn = (converters or {}).get(fmt) or _CONVERTERS.get(fmt)
    if fn is None:
        raise HubError(
            f"this model's source is in the {fmt!r} format and no converter for it was given. "
            f"Load it through the nlp.Auto* classes or `nlp hub download NAME`, or pass the converters: "
            f"nlp.hub.download(name, converters=nlp.auto.CONVERTERS)."
        )
    return fn


def is_converted(dst: Path) -> bool:
    return (dst / _MARKER).is_file()


def convert_once(fmt: str, src_dir: Path, dst: Path, converters: Mapping[str, Converter] | None = None) -> Path:
    """Convert `src_dir` into `dst` unless already done; safe under concurrent processes."""
    if is_converted(dst):
        return dst
    fn = get_converter(fmt, converters)
    dst.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(dst.parent / f".{dst.name}.lock")):
        if is_converted(dst):
            return dst
        try:
            # replaces a folder left by a crash before the marker was written
            with atomic_directory(dst) as tmp:
                logger.info("converting %s snapshot %s", fmt, src_dir)
                fn(Path(src_dir), tmp)
                (tmp / _MARKER).write_text(json.dumps({"format": fmt, "source": str(src_dir)}), encoding="utf-8")
        except BaseException as err:
            if isinstance(err, HubError) or not isinstance(err, Exception):
                raise
            raise HubError(f"converting the {fmt} snapshot {src_dir} failed: {type(err).__name__}: {err}") from err
    return dst
