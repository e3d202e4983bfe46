"""Foundation shared by every layer: the exception classes, did-you-mean, atomic writes.

This module imports nothing else of `nlp` but the foundation's `nlp._signals`, so any layer (the
hub included) may use it.
"""

from __future__ import annotations

import contextlib
import difflib
import functools
import hashlib
import logging
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Iterable, Iterator

from nlp._signals import signals_held

__all__ = [
    "NlpError",
    "UnknownNameError",
    "ConfigError",
    "DataError",
    "HubError",
    "did_you_mean",
    "atomic_write",
    "check_output_path",
    "output_path_error",
    "atomic_directory",
    "temporary_sibling",
    "shared_sibling",
    "publish_directory",
    "remove_abandoned_temporaries",
    "temporary_target",
    "fsync_directory",
    "current_umask",
    "sha256_file",
    "PRECISIONS",
]

logger = logging.getLogger(__name__)

# The precisions a PyTorch model runs inference in (nlp.models.precision resolves "auto"): the
# `precision=` of pipelines, `nlp predict --precision`, `nlp serve --precision`, `nlp evaluate
# --precision`; "int8" (CPU): the encoder's linear layers in int8 (nlp.models.int8_linear)
PRECISIONS = ("auto", "fp32", "bf16", "fp16", "int8")


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


def check_output_path(path: str | os.PathLike, option: str, *, directory: bool = False,
                      new: bool = False) -> Path:
    """Refuse, before any work, an output path that cannot be written: a ConfigError in one line
    naming `option` (`--out`, `--output`, ...) and `path`, saying why and the fix. Refused: a
    directory where a file is wanted (`directory=False`) or a file where a directory is; with
    `new`, anything already there (nothing is overwritten); a parent that is a file, or that
    cannot be created or written (checked by making, and removing at once, a temporary file in
    it). Missing parents are created. Returns the path, `~` expanded."""
    path = Path(path).expanduser()
    shown = f"{option} {str(path)!r}"
    if path.is_dir() and not directory:
        raise ConfigError(f"{shown} is a directory; give a file path (e.g. {str(path / 'out.jsonl')!r})")
    if directory and path.exists() and not path.is_dir():
        raise ConfigError(f"{shown} is a file, not a directory; give a directory path (nothing is overwritten)")
    if new and path.exists():
        raise ConfigError(f"{shown} exists; choose a new directory (nothing is overwritten)")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        os.close(fd)
        os.unlink(probe)
    except OSError as err:
        raise output_path_error(path, option, err) from None
    return path


def output_path_error(path: str | os.PathLike, option: str, err: OSError) -> ConfigError:
    """The ConfigError (one line: `option`, `path`, why, the fix) for `err`, raised while preparing
    the output path `path` (making its parents, a file or a temporary directory beside it)."""
    path = Path(path)
    existing = path.parent
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    reason = err.strerror or str(err) or type(err).__name__
    if existing.exists() and not existing.is_dir():
        why = f"its parent {str(existing)!r} is a file, not a directory"
    elif existing != path.parent:
        why = f"cannot create its parent directory {str(path.parent)!r} ({reason})"
    else:
        why = f"cannot write in {str(path.parent)!r} ({reason})"
    return ConfigError(f"{option} {str(path)!r}: {why}; choose a directory you can write to")


# The one name scheme of a directory written whole: `.tmp-NAME` (shared by every process of a run:
# a checkpoint they all write into), `.tmp-NAME~HOST_PID_XXXXXXXX` (one writer's own: HOST a hash
# of the host name and pid namespace, PID the writing process), and the directory it replaces,
# moved aside for a moment, `.tmp-NAME~HOST_PID_XXXXXXXX.old`. Stale-cleanup recognises them all
# with `temporary_target`; the writer's part lets `remove_abandoned_temporaries` tell a dead
# writer's.
_TEMP_DIR = re.compile(r"^\.tmp-(?P<name>[^~]+)(?:~[A-Za-z0-9_]+(?:\.old)?)?$")
_WRITER = re.compile(r"^\.tmp-(?P<name>[^~]+)~(?P<host>[0-9a-f]{8})_(?P<pid>[0-9]+)_[A-Za-z0-9_]+(?:\.old)?$")


def temporary_target(name: str) -> str | None:
    """The name that a temporary directory (`atomic_directory`'s scheme) was to become, or None
    when `name` is not one."""
    m = _TEMP_DIR.match(name)
    return m.group("name") if m else None


@contextlib.contextmanager
def atomic_directory(path: str | os.PathLike, *, mode: int | None = None) -> Iterator[Path]:
    """Yield a temporary sibling of `path` to fill (`.tmp-NAME~XXXXXXXX`: two writers of one path
    do not mix their files); on success it is published (`publish_directory`: fsynced, renamed
    into place, replacing a directory there); on failure it is removed. Readers see the old
    directory or the whole new one, never a part. `mode`: the directory's permissions (default:
    what mkdir would give under the umask)."""
    remove_abandoned_temporaries(path)
    tmp = None
    try:
        with signals_held():  # a signal between the mkdir and `tmp` being set would leak the directory
            tmp = temporary_sibling(path, mode=mode)
        yield tmp
        publish_directory(tmp, path)
    except BaseException:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
        raise


def temporary_sibling(path: str | os.PathLike, *, shared: bool = False, mode: int | None = None) -> Path:
    """Make the empty temporary directory that `path` is written into before `publish_directory`.
    `shared`: named `.tmp-NAME`, the same for every writer (the processes of one run writing one
    checkpoint), a stale one removed first; otherwise unique, `.tmp-NAME~HOST_PID_XXXXXXXX`."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if shared:
        tmp = shared_sibling(path)
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
    else:
        tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{path.name}~{_writer()}_", dir=path.parent))
    os.chmod(tmp, (0o777 & ~current_umask()) if mode is None else mode)  # mkdtemp's 0700 would hide it
    return tmp


def shared_sibling(path: str | os.PathLike) -> Path:
    """The shared temporary name of `path` (`.tmp-NAME`), for the processes that write into the
    directory one of them made with `temporary_sibling(path, shared=True)`."""
    return Path(path).parent / f".tmp-{Path(path).name}"


def publish_directory(tmp: str | os.PathLike, path: str | os.PathLike) -> None:
    """fsync everything under `tmp`, then rename it to `path`. A directory already at `path` is
    moved aside first, into `.tmp-NAME~HOST_PID_XXXXXXXX.old/`, put back if the rename fails, and
    removed last."""
    tmp, path = Path(tmp), Path(path)
    _fsync_tree(tmp)
    old = None
    if path.exists():
        old = Path(tempfile.mkdtemp(prefix=f".tmp-{path.name}~{_writer()}_", suffix=".old", dir=path.parent))
        os.replace(path, old / path.name)
    try:
        os.replace(tmp, path)
    except BaseException:
        if old is not None:
            os.replace(old / path.name, path)
        raise
    fsync_directory(path.parent)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def remove_abandoned_temporaries(path: str | os.PathLike) -> list[Path]:
    """Remove the temporary siblings of `path` (`.tmp-NAME~HOST_PID_*`, a write in progress or an
    old directory moved aside) whose writer was a process of this host that is no longer running:
    what SIGKILL, the OOM killer or a power cut left. Returns what was removed. A live writer's,
    another host's (a shared file system) and any name outside the scheme are left alone."""
    path = Path(path)
    removed: list[Path] = []
    if not path.parent.is_dir():
        return removed
    for p in path.parent.glob(f".tmp-{path.name}~*"):
        m = _WRITER.match(p.name)
        if m is None or m.group("name") != path.name or m.group("host") != _host() or _running(int(m.group("pid"))):
            continue
        shutil.rmtree(p, ignore_errors=True)
        removed.append(p)
        logger.info("removed %s, left by a write that did not finish (process %s)", p, m.group("pid"))
    return removed


def _writer() -> str:
    """This process's part of a temporary name: `HOST_PID` (the pid read each time: a forked
    child writes as itself)."""
    return f"{_host()}_{os.getpid()}"


@functools.cache
def _host() -> str:
    """A hash of the host name and the pid namespace (two containers may share a host name and a
    volume, but not their pids): whose pids a temporary name's PID is."""
    try:
        namespace = str(os.stat("/proc/self/ns/pid").st_ino)
    except OSError:  # no /proc (not Linux)
        namespace = ""
    return hashlib.sha256(f"{os.uname().nodename}/{namespace}".encode("utf-8", "surrogateescape")).hexdigest()[:8]


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    except OverflowError:  # not a pid at all
        return False
    return True


def _fsync_tree(root: Path) -> None:
    """fsync every file and directory under `root`, so that the rename publishes written data."""
    for dirpath, _, files in os.walk(root):
        for name in files:
            with contextlib.suppress(OSError):
                fd = os.open(os.path.join(dirpath, name), os.O_RDONLY)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
        fsync_directory(Path(dirpath))


def fsync_directory(path: str | os.PathLike) -> None:
    """fsync a directory (its entries: a rename into it); a filesystem that cannot is skipped."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


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
