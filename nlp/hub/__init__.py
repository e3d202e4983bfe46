"""nlp.hub: named models, verified resumable downloads, an offline cache, and a mirror server.

The hub moves files and knows no model class: it imports nothing of `nlp` but `nlp._common`.
Converters for foreign formats (Paddle) are passed in by the caller: `download(name, converters=...)`;
`nlp.auto.CONVERTERS` holds the models layer's. `fetch_file(url, name=...)` fetches one file (dataset
archives) under the same rules as model files.

    >>> import nlp.hub
    >>> nlp.hub.list_models("ernie-3.0-*")[:2]
    ['ernie-3.0-base-zh', 'ernie-3.0-medium-zh']
    >>> path = nlp.hub.download("ernie-3.0-mini-zh")    # doctest: +SKIP

The cache layout and the environment variables are documented in docs/hub.md.
"""

from __future__ import annotations

from ._env import hub_cache_dir, is_offline
from ._http import IntegrityError, RetryPolicy
from .cache import CacheEntry, remove_from_cache, scan_cache
from .cards import FileSpec, ModelCard, Source
from .convert import register_converter
from .download import download, resolve_card
from .file_download import fetch_file
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
    "RetryPolicy",
    "Source",
    "download",
    "fetch_file",
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
