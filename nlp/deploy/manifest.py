"""The manifest of an export directory: what the model is, how it was made, and a digest of
every file, so that a copy can be checked before it is served.

    {"format": "nlp-export", "format_version": 1, "task": "token-classification",
     "model": "model.onnx", "precision": "int8", "opset": 20,
     "inputs": [{"name": "input_ids", "dtype": "int64", "shape": ["batch", "sequence"]}, ...],
     "outputs": [{"name": "logits", "dtype": "float32", "shape": ["batch", "sequence", 7]}],
     "crf": "crf.safetensors" | null, "quantization": {...} | null,
     "source": {"path": "/abs/runs/ner", "kind": "run", "recipe": "recipe.yaml" | null},
     "check": {...}, "versions": {...},
     "files": {"model.onnx": {"sha256": "...", "bytes": 123}, ...}}
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from nlp._common import ConfigError, DataError, atomic_write, sha256_file

__all__ = ["MANIFEST_NAME", "FORMAT", "FORMAT_VERSION", "is_export_dir", "read_manifest",
           "file_digests", "write_manifest", "verify_files"]

MANIFEST_NAME = "manifest.json"
FORMAT = "nlp-export"
FORMAT_VERSION = 1


def file_digests(directory: Path) -> dict[str, dict[str, Any]]:
    """{relative path: {"sha256", "bytes"}} of every file under `directory` but the manifest."""
    out = {}
    for p in sorted(directory.rglob("*")):
        if p.is_file() and p.name != MANIFEST_NAME:
            out[p.relative_to(directory).as_posix()] = {"sha256": sha256_file(p), "bytes": p.stat().st_size}
    return out


def is_export_dir(path: str | Path) -> bool:
    """True for a directory that `nlp export` wrote (it holds an nlp-export manifest)."""
    path = Path(path).expanduser()
    manifest = path / MANIFEST_NAME
    if not manifest.is_file():
        return False
    try:
        return json.loads(manifest.read_text(encoding="utf-8")).get("format") == FORMAT
    except (OSError, ValueError, AttributeError):
        return False


def read_manifest(directory: str | Path) -> dict[str, Any]:
    """The manifest of an export directory (ConfigError naming the file when it is not one)."""
    path = Path(directory).expanduser() / MANIFEST_NAME
    if not path.is_file():
        raise ConfigError(f"{str(Path(directory))!r} is not an export directory: no {MANIFEST_NAME} "
                          "(write one with `nlp export RUN_OR_MODEL --out DIR`)")
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise DataError(f"{path}: not a JSON manifest ({err}); export the model again") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise DataError(f"{path}: not an {FORMAT} manifest (format: "
                        f"{manifest.get('format') if isinstance(manifest, dict) else None!r})")
    if manifest.get("format_version") != FORMAT_VERSION:
        raise DataError(f"{path}: format_version {manifest.get('format_version')!r}; this version of nlp "
                        f"reads {FORMAT_VERSION}: export the model again with it")
    for key in ("task", "model", "inputs", "outputs", "files"):
        if key not in manifest:
            raise DataError(f"{path}: the manifest has no {key!r}; export the model again")
    return manifest


def write_manifest(directory: Path, manifest: dict[str, Any]) -> dict[str, Any]:
    """Add the digests of every file in `directory` and write the manifest there."""
    manifest = {**manifest, "files": file_digests(directory)}
    with atomic_write(directory / MANIFEST_NAME, "w", encoding="utf-8") as f:
        json.dump(manifest, f, ensure_ascii=False, indent=2)
        f.write("\n")
    return manifest


def verify_files(directory: str | Path, manifest: dict[str, Any] | None = None) -> None:
    """DataError naming the first file that is missing or whose sha256 differs from the manifest."""
    directory = Path(directory).expanduser()
    manifest = manifest or read_manifest(directory)
    for name, entry in manifest["files"].items():
        p = directory / name
        if not p.is_file():
            raise DataError(f"{p}: listed in {MANIFEST_NAME} but missing; copy the whole export directory")
        digest = sha256_file(p)
        if digest != entry["sha256"]:
            raise DataError(f"{p}: sha256 {digest} but the manifest says {entry['sha256']}; "
                            "the file was changed or damaged: export the model again")
