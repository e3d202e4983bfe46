"""Reading and writing the files of a tokenizer directory (vocab.txt, JSON configs)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from nlp._common import ConfigError, atomic_write

__all__ = ["read_vocab", "write_vocab", "read_json", "write_json", "check_dir"]

# ERNIE 1.0 writes `token<TAB>id`; transformers reads the whole line as the token.
_ERNIE_LINE = re.compile(r"^(.*)\t(\d+)$")


def check_dir(directory: str | Path) -> Path:
    path = Path(directory)
    if not path.is_dir():
        raise ConfigError(
            f"tokenizer directory {str(directory)!r} does not exist or is not a directory; "
            "give a local directory holding vocab.txt or tokenizer.json "
            "(use nlp.AutoTokenizer to resolve a model name through the hub)"
        )
    return path


def read_vocab(path: Path) -> dict[str, int]:
    """Token -> id from a vocab.txt: one token a line, or ERNIE 1.0 `token<TAB>id` lines.

    Plain files follow transformers (id = line number, a later duplicate wins). ERNIE files
    must give every id 0..n-1 exactly once, so that ids survive a round trip to plain lines.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise ConfigError(f"vocab file {str(path)!r} is not UTF-8 text ({err})") from None
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    lines = [ln[:-1] if ln.endswith("\r") else ln for ln in lines]
    if not lines:
        raise ConfigError(f"vocab file {str(path)!r} is empty; it needs one token per line")
    first = next((ln for ln in lines if ln), "")
    if _ERNIE_LINE.match(first):
        vocab: dict[str, int] = {}
        seen: dict[int, int] = {}
        for n, line in enumerate(lines, 1):
            m = _ERNIE_LINE.match(line)
            if not m:
                raise ConfigError(
                    f"vocab file {str(path)!r} line {n}: {line!r:.60} is not `token<TAB>id`, "
                    "but the first line is; use one format for the whole file"
                )
            token, idx = m.group(1), int(m.group(2))
            if idx in seen:
                raise ConfigError(
                    f"vocab file {str(path)!r} line {n}: id {idx} was already given on line {seen[idx]}"
                )
            if token in vocab:
                raise ConfigError(f"vocab file {str(path)!r} line {n}: token {token!r} appears twice")
            seen[idx] = n
            vocab[token] = idx
        if set(seen) != set(range(len(seen))):
            missing = sorted(set(range(len(seen))) - set(seen))[:5]
            raise ConfigError(
                f"vocab file {str(path)!r}: ids must be 0..{len(seen) - 1} without gaps; missing {missing}"
            )
        return vocab
    return {token: i for i, token in enumerate(lines)}


def write_vocab(path: Path, vocab: dict[str, int]) -> None:
    tokens = sorted(vocab, key=vocab.__getitem__)
    for token in tokens:
        if "\n" in token or "\r" in token:
            raise ConfigError(f"token {token!r} holds a line break and cannot be written to vocab.txt")
    with atomic_write(path, "w", encoding="utf-8") as f:
        f.write("".join(t + "\n" for t in tokens))


def read_json(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ConfigError(f"{str(path)!r} is not valid JSON: {err}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{str(path)!r} must hold a JSON object, got {type(data).__name__}")
    return data


def write_json(path: Path, data: dict[str, Any]) -> None:
    with atomic_write(path, "w", encoding="utf-8") as f:
        json.dump(data, f, ensure_ascii=False, indent=2)
        f.write("\n")
