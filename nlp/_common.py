"""Foundation shared by every layer: the exception classes, did-you-mean, atomic writes.

This module imports nothing else of `nlp`, so any layer (the hub included) may use it.
"""

from __future__ import annotations

import contextlib
import difflib
import hashlib
import os
import tempfile
from pathlib import Path
from typing import Iterable, Iterator

__all__ = [
    "NlpError",
    "UnknownNameError",
    "ConfigError",
    "DataError",
    "HubError",
    "did_you_mean",
    "atomic_write",
    "current_umask",
    "sha256_file",
    "PRECISIONS",
]

# The precisions a PyTorch model runs inference in (nlp.models.precision resolves "auto"): the
# `precision=` of pipelines, `nlp predict --precision`, `nlp serve --precision`
PRECISIONS = ("auto", "fp32", "bf16", "fp16")


class NlpError(Exception):
    """Base of every error this toolkit raises on purpose."""


class UnknownNameError(NlpError, KeyError):
    """A name (model, task, dataset, recipe key) that is not known."""

    def __str__(self) -> str:  # KeyError would wrap the message in quotes
        return str(self.args[0]) if self.args else ""


class ConfigError(NlpError, ValueError):
    """A config, recipe or argument value that is invalid."""


class DataError(NlpError, ValueError):
    """Bad input data: the message names the file, line or record."""


class HubError(NlpError, OSError):
    """A model could not be found, downloaded or verified."""


def did_you_mean(name: str, choices: Iterable[str], n: int = 1) -> str:
    """Return " Did you mean 'x'?" for the closest choice, or "" when none is close."""
    close = difflib.get_close_matches(str(name), list(choices), n=n, cutoff=0.6)
    if not close:
        return ""
    return " Did you mean " + " or ".join(repr(c) for c in close) + "?"


@contextlib.contextmanager
def atomic_write(path: str | os.PathLike, mode: str = "wb", **kwargs) -> Iterator:
    """Write to a temp file in the same directory, then rename over `path`.

    A crash while writing leaves the previous file intact; readers never see half a file.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, mode, **kwargs) as f:
            yield f
            f.flush()
            os.fchmod(f.fileno(), 0o666 & ~current_umask())  # as open() would: mkstemp's 0600 hides it
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def current_umask() -> int:
    """The process's umask, read without changing it (os.umask can only set it, and setting it
    back and forth would race with other threads creating files)."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)  # no /proc: the one way there is
    os.umask(mask)
    return mask


def sha256_file(path: str | os.PathLike) -> str:
    """The hex sha256 of a file, read in 1 MiB blocks (weights files need not fit in memory)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(1 << 20):
            h.update(block)
    return h.hexdigest()
