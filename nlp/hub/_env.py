"""Environment variables of the hub: where the cache lives, and whether the network is off.

Kept in one place so that docs/hub.md, `nlp hub cache ls` and the downloader agree.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["hub_cache_dir", "is_offline", "mirror_endpoints", "offline_reason"]

_TRUE = {"1", "true", "yes", "on"}


def _truthy(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in _TRUE


def is_offline(datasets: bool = False) -> bool:
    """True when `NLP_OFFLINE` or Hugging Face's `HF_HUB_OFFLINE` is set to 1/true/yes/on; for
    dataset files (`datasets=True`) also `HF_DATASETS_OFFLINE`, as the datasets library reads it."""
    return _truthy("NLP_OFFLINE") or _truthy("HF_HUB_OFFLINE") or (datasets and _truthy("HF_DATASETS_OFFLINE"))


def offline_reason() -> str:
    """Which variables turned the network off, for messages."""
    on = [v for v in ("NLP_OFFLINE", "HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE") if _truthy(v)]
    return ", ".join(on) or "local_files_only=True"


def hub_cache_dir(cache_dir: str | os.PathLike | None = None) -> Path:
    """The cache root: the argument, else `NLP_HUB_CACHE`, else `$NLP_HOME/hub`.

    `NLP_HOME` defaults to `$XDG_CACHE_HOME/nlp`, i.e. `~/.cache/nlp`, mirroring `HF_HOME`.
    """
    if cache_dir is not None:
        return Path(cache_dir).expanduser()
    if os.environ.get("NLP_HUB_CACHE"):
        return Path(os.environ["NLP_HUB_CACHE"]).expanduser()
    home = os.environ.get("NLP_HOME") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "nlp"
    )
    return Path(home).expanduser() / "hub"


def mirror_endpoints() -> list[str]:
    """`NLP_HUB_MIRROR`: comma-separated mirror endpoints (URLs) or directories, tried first for every name."""
    raw = os.environ.get("NLP_HUB_MIRROR", "")
    return [m.strip() for m in raw.split(",") if m.strip()]
