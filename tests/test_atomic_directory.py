"""One way to write a directory whole (nlp._common.atomic_directory): a temporary sibling in one
name scheme that stale-cleanup recognises, fsynced and renamed into place; the old directory
survives a failed write; what a killed writer left goes with the next write of the same path, and
nothing else does; and no module of `nlp` renames a directory into place by hand."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import nlp
from nlp._common import (atomic_directory, publish_directory, remove_abandoned_temporaries, temporary_sibling,
                         temporary_target)

NLP_DIR = Path(nlp.__file__).parent


def test_a_directory_appears_whole_and_a_failed_write_keeps_the_old_one(tmp_path):
    out = tmp_path / "model"
    with atomic_directory(out) as tmp:
        assert temporary_target(tmp.name) == "model" and tmp.parent == tmp_path
        (tmp / "a.txt").write_text("one")
        assert not out.exists()  # nothing visible until the end
    assert (out / "a.txt").read_text() == "one"
    with pytest.raises(RuntimeError, match="half"):
        with atomic_directory(out) as tmp:
            (tmp / "a.txt").write_text("two")
            raise RuntimeError("half written")
    assert (out / "a.txt").read_text() == "one" and sorted(p.name for p in tmp_path.iterdir()) == ["model"]
    with atomic_directory(out) as tmp:  # replaces: the old one is moved aside, then removed
        (tmp / "b.txt").write_text("three")
    assert sorted(p.name for p in out.iterdir()) == ["b.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"]


def test_one_scheme_for_every_temporary_directory(tmp_path):
    shared = temporary_sibling(tmp_path / "step-00000004", shared=True)
    assert shared.name == ".tmp-step-00000004" and temporary_target(shared.name) == "step-00000004"
    own = temporary_sibling(tmp_path / "export")
    assert own.name.startswith(".tmp-export~") and temporary_target(own.name) == "export"
    assert temporary_target(".tmp-export~ab12_cd.old") == "export"
    for name in ("export", ".export.tmp-x", ".summary.json.ab12.tmp", "tmp-x"):
        assert temporary_target(name) is None
    publish_directory(own, tmp_path / "export")
    assert (tmp_path / "export").is_dir() and not own.exists()


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_what_a_killed_writer_left_goes_with_the_next_write_and_nothing_else(tmp_path):
    out = tmp_path / "model"
    own = temporary_sibling(out)  # this live process's: a write in progress
    host_pid = own.name[len(".tmp-model~"):].rsplit("_", 1)[0]
    host, pid = host_pid.split("_")
    assert pid == str(os.getpid()) and len(host) == 8
    dead = _dead_pid()
    abandoned = [tmp_path / f".tmp-model~{host}_{dead}_k1lled00", tmp_path / f".tmp-model~{host}_{dead}_k1lled01.old"]
    kept = [own,
            tmp_path / f".tmp-model~0000beef_{dead}_k1lled00",  # another host's, on a shared file system
            tmp_path / ".tmp-model~k1lled00",  # outside the writer scheme: not known to be a dead writer's
            tmp_path / f".tmp-other~{host}_{dead}_k1lled00",  # another path's
            tmp_path / ".tmp-model"]  # the shared name of a checkpoint every process writes into
    for p in abandoned + kept[1:]:
        (p / "sub").mkdir(parents=True)
        (p / "sub" / "half.bin").write_bytes(b"\0" * 64)
    assert sorted(remove_abandoned_temporaries(out)) == sorted(abandoned)
    assert all(p.is_dir() for p in kept) and not any(p.exists() for p in abandoned)
    (abandoned[0] / "x").mkdir(parents=True)
    with atomic_directory(out) as tmp:  # every write of `out` removes them first
        assert not abandoned[0].exists()
        (tmp / "a.txt").write_text("one")
    assert (out / "a.txt").read_text() == "one" and all(p.is_dir() for p in kept)


# A directory renamed into place by hand: os.replace / os.rename of a temporary directory.
_HAND_WRITTEN = re.compile(r"mkdtemp\(|os\.(?:replace|rename)\((?:tmp|stage|old|final)\b")
_ALLOWED = {
    "_common.py",  # the helper itself
    "ship.py",  # the cards file joins its swap: the old folder comes back if the card cannot be written
    "hf_protocol.py",  # a symlink replaced atomically, not a directory
    "_http.py",  # a downloaded file, not a directory
}


def test_no_directory_is_renamed_into_place_by_hand():
    found = [f"{p.relative_to(NLP_DIR)}:{i}: {line.strip()}"
             for p in NLP_DIR.rglob("*.py") if p.name not in _ALLOWED
             for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if _HAND_WRITTEN.search(line)]
    assert found == [], found
