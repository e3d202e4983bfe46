"""The registry of names: built-in cards (cards.yaml), user cards, and per-name mirrors.

Users add cards from a YAML/JSON file (`register_cards_file`, or the `NLP_HUB_CARDS` env var,
a list of paths separated by the OS path separator, read on first use) or from Python
(`register_card`). A user card with a built-in name replaces it, so a team can repoint a name.
"""

from __future__ import annotations

import fnmatch
import json
import logging
import os
import threading
from dataclasses import replace
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from nlp._common import ConfigError, UnknownNameError, did_you_mean

from .cards import ModelCard

__all__ = ["find_card", "get_card", "list_models", "register_card", "register_cards_file", "set_mirror"]

logger = logging.getLogger(__name__)

_CARDS: dict[str, ModelCard] = {}
_ALIASES: dict[str, str] = {}
_LOADED = False
_LOCK = threading.RLock()


def _ensure_loaded() -> None:
    global _LOADED
    if _LOADED:
        return
    with _LOCK:
        if _LOADED:
            return
        text = resources.files("nlp.hub").joinpath("cards.yaml").read_text(encoding="utf-8")
        for obj in yaml.safe_load(text)["cards"]:
            _add(ModelCard.from_dict(obj))
        _LOADED = True
        for path in filter(None, os.environ.get("NLP_HUB_CARDS", "").split(os.pathsep)):
            register_cards_file(path)


def _add(card: ModelCard) -> ModelCard:
    if card.name in _CARDS:
        logger.info("model card %r replaced", card.name)
    _CARDS[card.name] = card
    for alias in card.aliases:
        _ALIASES[alias] = card.name
    return card


def register_card(card_or_dict: ModelCard | dict[str, Any]) -> ModelCard:
    """Add (or replace) a card; returns the validated card. Raises ConfigError listing every problem."""
    _ensure_loaded()
    with _LOCK:
        return _add(ModelCard.from_dict(card_or_dict))


def register_cards_file(path: str | os.PathLike) -> list[ModelCard]:
    """Register the cards of a YAML or JSON file: a list of cards, or a mapping with a `cards` list."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise ConfigError(f"cannot read cards file {str(path)!r}: {err.strerror or err}") from err
    try:
        data = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (ValueError, yaml.YAMLError) as err:
        raise ConfigError(f"cards file {str(path)!r} is not valid {'JSON' if path.suffix == '.json' else 'YAML'}: {err}") from err
    if isinstance(data, dict) and "cards" in data:
        data = data["cards"]
    elif isinstance(data, dict):
        data = [data]
    if not isinstance(data, list):
        raise ConfigError(f"cards file {str(path)!r} must hold a card, a list of cards or {{cards: [...]}}")
    try:
        return [register_card(obj) for obj in data]
    except ConfigError as err:
        raise ConfigError(f"in {path}: {err}") from err


def find_card(name: str) -> ModelCard | None:
    _ensure_loaded()
    name = _ALIASES.get(name, name)
    return _CARDS.get(name)


def get_card(name: str) -> ModelCard:
    """The card of a registered name (or alias); UnknownNameError with a did-you-mean otherwise."""
    card = find_card(name)
    if card is None:
        raise UnknownNameError(
            f"Unknown model {name!r}.{did_you_mean(name, list(_CARDS) + list(_ALIASES))} "
            "See `nlp hub ls` for the registered names; an 'owner/repo' id or a local directory also works."
        )
    return card


def list_models(pattern: str | None = None) -> list[str]:
    """Registered names, sorted; `pattern` is a shell glob ("ernie-3.0-*") or a substring."""
    _ensure_loaded()
    names = sorted(_CARDS)
    if not pattern:
        return names
    if any(c in pattern for c in "*?["):
        return [n for n in names if fnmatch.fnmatchcase(n, pattern)]
    return [n for n in names if pattern in n]


def set_mirror(name: str, mirror: str | None) -> ModelCard:
    """Point a registered name at a private mirror (endpoint URL or directory), tried before its sources."""
    card = get_card(name)
    with _LOCK:
        return _add(replace(card, mirror=mirror))
