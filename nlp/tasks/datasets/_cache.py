"""A small on-disk cache of parsed datasets under ``$NLP_HOME/datasets`` (Arrow files).

The key hashes the source files' paths, sizes and mtimes with the parser version, so an
upgraded corpus or parser rebuilds, and a repeated load is a memory-mapped read.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Callable, Sequence

from filelock import FileLock

from nlp._common import atomic_directory
from nlp._extras import LazyModule

datasets = LazyModule("datasets", "reading and preparing datasets")  # the train extra

__all__ = ["nlp_home", "cached_build"]


def nlp_home() -> Path:
    """``$NLP_HOME``, else ``$XDG_CACHE_HOME/nlp``, else ``~/.cache/nlp``."""
    if os.environ.get("NLP_HOME"):
        return Path(os.environ["NLP_HOME"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "nlp"


def _key(sources: Sequence[Path], version: str) -> str:
    h = hashlib.sha256(version.encode())
    for src in sources:
        st = src.stat()
        h.update(f"{src.resolve()}|{st.st_size}|{st.st_mtime_ns}".encode())
    return h.hexdigest()[:16]


def cached_build(
    name: str, sources: Sequence[Path], version: str,
    build: Callable[[], tuple[datasets.DatasetDict, dict]], cache_dir: str | os.PathLike | None = None,
) -> tuple[datasets.DatasetDict, dict]:
    """Load `name` from the cache, or `build()` it (dataset + stats) and store both atomically."""
    root = Path(cache_dir) if cache_dir else nlp_home() / "datasets"
    target = root / name / _key(sources, version)
    stats_file = target / "nlp_stats.json"
    if not stats_file.is_file():
        target.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(str(target) + ".lock"):
            if not stats_file.is_file():  # another process may have built it meanwhile
                dsd, stats = build()
                quiet = datasets.utils.logging.is_progress_bar_enabled()
                datasets.disable_progress_bars()  # a cache write is not the user's business
                try:
                    with atomic_directory(target) as tmp:
                        dsd.save_to_disk(str(tmp))
                        (tmp / "nlp_stats.json").write_text(json.dumps(stats, ensure_ascii=False, indent=1),
                                                            encoding="utf-8")
                finally:
                    if quiet:
                        datasets.enable_progress_bars()
    dsd = datasets.load_from_disk(str(target))
    return dsd, json.loads(stats_file.read_text(encoding="utf-8"))
