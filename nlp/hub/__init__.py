"""nlp.hub: named models, verified resumable downloads, an offline cache, and a mirror server.

The hub moves files and knows no model class: it imports nothing of `nlp` but `nlp._common`.
Converters for foreign formats (Paddle) are injected by `nlp.auto` through `register_converter`.

    >>> import nlp.hub
    >>> nlp.hub.list_models("ernie-3.0-*")[:2]
    ['ernie-3.0-base-zh', 'ernie-3.0-medium-zh']
    >>> path = nlp.hub.download("ernie-3.0-mini-zh")    # doctest: +SKIP

The cache layout and the environment variables are documented in docs/hub.md.
"""

from __future__ import annotations

from ._env import hub_cache_dir, is_offline
from ._http import IntegrityError
from .cache import CacheEntry, remove_from_cache, scan_cache
from .cards import FileSpec, ModelCard, Source
from .convert import register_converter
from .download import download, resolve_card
from .registry import (
    get_card,
    list_models,
    register_card,
    register_cards_file,
    set_mirror,
)

__all__ = [
    "CacheEntry",
    "FileSpec",
    "IntegrityError",
    "ModelCard",
    "Source",
    "download",
    "get_card",
    "hub_cache_dir",
    "is_offline",
    "list_models",
    "register_card",
    "register_cards_file",
    "register_converter",
    "remove_from_cache",
    "resolve_card",
    "scan_cache",
    "set_mirror",
]
