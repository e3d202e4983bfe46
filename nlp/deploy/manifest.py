"""The manifest of an export directory: what the model is, how it was made, and a digest of
every file, so that a copy can be checked before it is served.

    {"format": "nlp-export", "format_version": 2, "task": "token-classification",
     "model": "model.onnx", "precision": "int8", "opset": 20,
     "inputs": [{"name": "input_ids", "dtype": "int64", "shape": ["batch", "sequence"]}, ...],
     "outputs": [{"name": "logits", "dtype": "float32", "shape": ["batch", "sequence", 7]}],
     "decoding": "decoding.safetensors" | null, "quantization": {...} | null,
     "source": {"path": "/abs/runs/ner", "kind": "run", "recipe": "recipe.yaml" | null},
     "check": {...}, "versions": {...},
     "files": {"model.onnx": {"sha256": "...", "bytes": 123}, ...}}

"decoding" names the file of the head's decoding tensors (what its task decodes with outside
the graph), whatever the task. Version 1 named that entry after the one kind of tensors that
existed then; `read_manifest` reads a version-1 manifest as version 2, so older exports load.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from nlp._common import ConfigError, DataError, atomic_write, sha256_file
from nlp.tasks.model_io import EXPORT_MANIFEST

__all__ = ["MANIFEST_NAME", "FORMAT", "FORMAT_VERSION", "DECODING_FILE", "is_export_dir", "read_manifest",
           "file_digests", "write_manifest", "verify_files", "unlisted_files"]

MANIFEST_NAME = EXPORT_MANIFEST
FORMAT = "nlp-export"
FORMAT_VERSION = 2
DECODING_FILE = "decoding.safetensors"  # the head's decoding tensors, when it has any
# format_version 1's key for the decoding file (the same safetensors content): read as "decoding"
_V1_DECODING_KEY = "crf"


def file_digests(directory: Path) -> dict[str, dict[str, Any]]:
    """{relative path: {"sha256", "bytes"}} of every file under `directory` but the manifest
    (and hidden ones: temp files)."""
    return {name: {"sha256": sha256_file(directory / name), "bytes": (directory / name).stat().st_size}
            for name in file_names(directory)}


def is_export_dir(path: str | Path) -> bool:
    """True for a directory that `nlp export` wrote: it holds an nlp-export manifest, or a
    manifest.json that is not JSON at all (a damaged export: its readers then say so, instead of
    loading the directory as something else)."""
    path = Path(path).expanduser()
    manifest = path / MANIFEST_NAME
    if not manifest.is_file():
        return False
    try:
        parsed = json.loads(manifest.read_text(encoding="utf-8"))
    except (ValueError, RecursionError):  # JSONDecodeError, UnicodeDecodeError
        return True
    except OSError:
        return False
    return isinstance(parsed, dict) and parsed.get("format") == FORMAT


def read_manifest(directory: str | Path) -> dict[str, Any]:
    """The manifest of an export directory (ConfigError naming the file when it is not one)."""
    path = Path(directory).expanduser() / MANIFEST_NAME
    if not path.is_file():
        raise ConfigError(f"{str(Path(directory))!r} is not an export directory: no {MANIFEST_NAME} "
                          "(write one with `nlp export RUN_OR_MODEL --out DIR`)")
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as err:
        raise DataError(f"{path}: not a JSON manifest ({type(err).__name__}: {err}); the directory is damaged: "
                        "export the model again with `nlp export RUN_OR_MODEL --out DIR`") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise DataError(f"{path}: not an {FORMAT} manifest (format: "
                        f"{manifest.get('format') if isinstance(manifest, dict) else None!r})")
    version = manifest.get("format_version")
    if version == 1:
        manifest = _from_v1(manifest)
    elif version != FORMAT_VERSION:
        raise DataError(f"{path}: format_version {version!r}; this version of nlp reads 1 and {FORMAT_VERSION}: "
                        "export the model again with it")
    for key in ("task", "model", "inputs", "outputs", "files"):
        if key not in manifest:
            raise DataError(f"{path}: the manifest has no {key!r}; export the model again")
    _check_entries(path, manifest)
    return manifest


def _from_v1(manifest: dict[str, Any]) -> dict[str, Any]:
    """A version-1 manifest as version 2: its decoding file under "decoding"."""
    out = {k: v for k, v in manifest.items() if k != _V1_DECODING_KEY}
    out["decoding"] = manifest.get(_V1_DECODING_KEY)
    out["format_version"] = FORMAT_VERSION
    return out


def _check_entries(path: Path, manifest: dict[str, Any]) -> None:
    """DataError unless `files` maps relative paths inside the directory to {"sha256", "bytes"},
    and the model (and decoding) file the loader opens is one of them."""
    files = manifest["files"]
    if not isinstance(files, dict) or not files:
        raise DataError(f"{path}: \"files\" must map each file of the export to its sha256 and size, got "
                        f"{_kind(files)}; export the model again")
    for name, entry in files.items():
        _inside(path, name, "a \"files\" entry")
        if (not isinstance(entry, dict) or not isinstance(entry.get("sha256"), str)
                or isinstance(entry.get("bytes"), bool) or not isinstance(entry.get("bytes"), int)):
            raise DataError(f"{path}: the entry of {name!r} must be {{\"sha256\": \"...\", \"bytes\": N}}, got "
                            f"{_kind(entry)}; export the model again")
    for key in ("model", "decoding"):
        value = manifest.get(key)
        if key == "decoding" and value is None:
            continue
        _inside(path, value, f"\"{key}\"")
        if value not in files:
            raise DataError(f"{path}: \"{key}\" is {value!r}, which \"files\" does not list, so it cannot be "
                            "checked; export the model again")


def _inside(path: Path, name: Any, what: str) -> None:
    """DataError unless `name` is a plain relative path inside the export directory."""
    parts = Path(name).parts if isinstance(name, str) and name else ()
    if not parts or Path(name).is_absolute() or ".." in parts or "\\" in name:
        raise DataError(f"{path}: {what} names {name!r}, which is not a file inside the export directory "
                        "(a relative path without '..'); an export reads only its own files: export the model "
                        "again")


def _kind(value: Any) -> str:
    text = json.dumps(value)[:60] if isinstance(value, (dict, list, str, int, float, bool, type(None))) else repr(value)
    return f"a JSON {type(value).__name__} ({text})"


def unlisted_files(directory: Path, manifest: dict[str, Any]) -> list[str]:
    """Files under `directory` (not hidden, not the manifest) that the manifest does not list."""
    listed = set(manifest["files"])
    return [name for name in file_names(directory) if name not in listed]


def file_names(directory: Path) -> list[str]:
    """Relative paths of the files under `directory` an export owns: all but hidden ones and the manifest."""
    out = []
    for p in sorted(directory.rglob("*")):
        rel = p.relative_to(directory)
        if p.is_file() and p.name != MANIFEST_NAME and not any(part.startswith(".") for part in rel.parts):
            out.append(rel.as_posix())
    return out


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
    extra = unlisted_files(directory, manifest)
    if extra:
        raise DataError(f"{directory / extra[0]}: in the export directory but not in its {MANIFEST_NAME}, so it "
                        f"would be read unchecked ({len(extra)} such file(s): {', '.join(extra[:5])}); remove "
                        "what does not belong there, or export the model again")
    root = directory.resolve()
    for name, entry in manifest["files"].items():
        p = directory / name
        if p.exists() and root not in p.resolve().parents:
            raise DataError(f"{p}: a link to {p.resolve()}, outside the export directory; an export reads only its "
                            "own files: copy the file in and export again")
        if not p.is_file():
            raise DataError(f"{p}: listed in {MANIFEST_NAME} but missing; copy the whole export directory")
        digest = sha256_file(p)
        if digest != entry["sha256"]:
            raise DataError(f"{p}: sha256 {digest} but the manifest says {entry['sha256']}; "
                            "the file was changed or damaged: export the model again")
