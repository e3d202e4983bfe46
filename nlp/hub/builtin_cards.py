"""Cards of models shipped as package data: the `builtin` source written from the files on disk.

`nlp hub ship` (nlp/ship.py) writes a model's folder under the package's assets, then calls
`builtin_card` and `write_card_block` here: every file's sha256 and size come from the folder,
never from a hand-typed list, and the revision label is a digest of them, so it changes with any
file. In cards.yaml a shipped card sits between two marker comments; shipping the same name
again replaces that block and leaves every other line (and its comments) as it was.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any, Mapping

import yaml

from nlp._common import ConfigError, atomic_write

from .cards import ModelCard

__all__ = ["builtin_card", "revision_label", "write_card_block", "card_block_markers"]


def revision_label(digests: Mapping[str, Mapping[str, Any]]) -> str:
    """"sha-" + 12 hex digits of a digest over every (file name, sha256): any file changed,
    added or removed gives another label (and so another snapshot folder in the cache)."""
    h = hashlib.sha256()
    for name in sorted(digests):
        h.update(f"{name}\0{digests[name]['sha256']}\n".encode())
    return "sha-" + h.hexdigest()[:12]


def builtin_card(name: str, digests: Mapping[str, Mapping[str, Any]], *, package: str, path: str,
                 architecture: str, heads: list[str], license: str, description: str) -> ModelCard:
    """The validated card of a shipped folder (`package`:`path`) with the given file digests."""
    return ModelCard.from_dict({
        "name": name, "architecture": architecture, "heads": list(heads), "license": license,
        "description": description, "homepage": f"{package}/{path}/README.md",
        "sources": [{"kind": "builtin", "package": package, "path": path,
                     "revision": revision_label(digests),
                     "files": [{"name": n, "sha256": d["sha256"], "size": d["size"]}
                               for n, d in sorted(digests.items())]}],
    })


def card_block_markers(name: str) -> tuple[str, str]:
    """The comment lines around a shipped card in cards.yaml."""
    return (f"# ---- {name}: written by `nlp hub ship` (nlp/ship.py); ship again to change it, "
            "do not edit by hand ----", f"# ---- end of {name} ----")


def _card_names(text: str, where: Path) -> list[str]:
    try:
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError as err:
        raise ConfigError(f"{where} is not valid YAML: {err}") from err
    cards = (data.get("cards") or []) if isinstance(data, dict) else None
    if not isinstance(cards, list):
        raise ConfigError(f"{where} must be a mapping with a 'cards' list")
    return [ModelCard.from_dict(c).name for c in cards]


def write_card_block(cards_file: str | Path, card: ModelCard, comment: str = "") -> None:
    """Put `card` into `cards_file` between its markers: replace the block of a name shipped
    before, else append one. A name whose card is written by hand (outside markers) is refused.
    The whole new file is parsed and every card validated before it replaces the old one."""
    cards_file = Path(cards_file)
    text = cards_file.read_text(encoding="utf-8") if cards_file.is_file() else "cards:\n"
    begin, end = card_block_markers(card.name)
    lines = [begin, *(f"# {ln}".rstrip() for ln in comment.splitlines())]
    body = yaml.safe_dump([card.to_dict()], sort_keys=False, allow_unicode=True, width=100).rstrip("\n")
    block = "\n".join([*lines, body, end]) + "\n"
    pattern = re.compile(rf"^{re.escape(begin)}\n.*?^{re.escape(end)}\n", re.S | re.M)
    if pattern.search(text):
        new = pattern.sub(lambda _: block, text, count=1)
    elif card.name in _card_names(text, cards_file):
        raise ConfigError(f"{card.name!r} already has a hand-written card in {cards_file}; ship the model "
                          "under another name, or remove that card first")
    else:
        new = text + ("" if text.endswith("\n") else "\n") + block
    names = _card_names(new, cards_file)
    if names.count(card.name) != 1:
        raise ConfigError(f"{cards_file}: writing {card.name!r} would leave {names.count(card.name)} cards "
                          "of that name; fix the file by hand")
    with atomic_write(cards_file, "w", encoding="utf-8") as f:
        f.write(new)
