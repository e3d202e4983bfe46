"""The parsed-dataset cache: what a build killed mid-write left goes with the next build of the
same key, and nothing else does."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from nlp._common import temporary_sibling
from nlp.tasks.datasets._cache import cached_build

datasets = pytest.importorskip("datasets")


def _build(calls: list):
    def build():
        calls.append(1)
        return datasets.DatasetDict({"train": datasets.Dataset.from_dict({"text": ["一", "二"]})}), {"rows": 2}
    return build


def test_a_killed_build_s_leftovers_go_with_the_next_build_and_nothing_else(tmp_path):
    source = tmp_path / "corpus.txt"
    source.write_text("一\n二\n", encoding="utf-8")
    calls: list = []
    dsd, stats = cached_build("toy", [source], "1", _build(calls), tmp_path / "first")
    key = next(p.name for p in (tmp_path / "first" / "toy").iterdir() if p.is_dir())
    assert stats == {"rows": 2} and list(dsd["train"]["text"]) == ["一", "二"]

    cache = tmp_path / "second"
    writer = temporary_sibling(cache / "toy" / key)  # named as this process's writes are
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    stale = writer.with_name(writer.name.replace(f"_{os.getpid()}_", f"_{child.pid}_"))
    writer.rename(stale)  # ... by a process that is gone: SIGKILL in the middle of save_to_disk
    (stale / "train").mkdir()
    (stale / "train" / "data-00000-of-00001.arrow").write_bytes(b"\0" * 1024)
    others = [cache / "toy" / ".tmp-0123456789abcdef~k1lled00", cache / "toy" / "notes.txt"]
    others[0].mkdir()
    others[1].write_text("mine", encoding="utf-8")
    cached_build("toy", [source], "1", _build(calls), cache)
    assert not stale.exists() and all(p.exists() for p in others)
    cached_build("toy", [source], "1", _build(calls), cache)  # a hit: nothing built
    assert len(calls) == 2 and all(p.exists() for p in others)
