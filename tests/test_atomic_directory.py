"""One way to write a directory whole (nlp._common.atomic_directory): a temporary sibling in one
name scheme that stale-cleanup recognises, fsynced and renamed into place; the old directory
survives a failed write; and no module of `nlp` renames a directory into place by hand."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import nlp
from nlp._common import atomic_directory, publish_directory, temporary_sibling, temporary_target

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
