"""Release copies of a model directory: what ships as package data (nlp/assets/<name>/).

One implementation for every shipped model, the pretrained ernie-tiny-zh
(`nlp.ship.release_pretrained`) and the fine-tuned task models (`nlp hub ship`, nlp/ship.py):
the weights cast to fp16 (half the size; `from_pretrained` loads them into fp32 parameters) or,
where the package's size needs it, stored as int8 rows with a scale each (a quarter of fp32),
config.json as the model class writes it, and the tokenizer files copied (tokenizer.json without
its indentation: the same JSON in about half the bytes).
"""

from __future__ import annotations

import json
import shutil
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from nlp._common import ConfigError, atomic_write, sha256_file

from ._int8_weights import INT8_FORMAT, quantize_rows
from ._modeling import WEIGHTS_NAME, PreTrainedEncoder

__all__ = ["TOKENIZER_FILES", "WEIGHT_FORMATS", "WeightStorage", "weight_storage", "save_stored_as",
           "write_release_copy", "file_digests"]

# the files a tokenizer directory may hold (WordPiece and jieba+BPE hybrid alike)
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt",
                   "gazetteer.tsv.gz")


# How a release copy stores its weights: fp16 (transformers reads it), or int8 rows with a scale
# each (half of fp16 again; read by `from_pretrained` here only, nlp/models/_int8_weights.py)
WEIGHT_FORMATS = ("fp16", "int8")


def write_release_copy(model: PreTrainedEncoder, src_dir: str | Path, dst_dir: str | Path, *,
                       dtype: torch.dtype = torch.float16, weights: str = "fp16") -> None:
    """Write `model` cast to `dtype` (config.json + model.safetensors) into `dst_dir`, and copy
    the tokenizer files `src_dir` holds. `weights="int8"` then stores the 2-D weights as int8
    rows (`quantize_rows`). The caller's `model` is left as it was."""
    if weights not in WEIGHT_FORMATS:
        raise ConfigError(f"weights={weights!r}; valid: {', '.join(WEIGHT_FORMATS)}")
    src, dst = Path(src_dir), Path(dst_dir)
    dst.mkdir(parents=True, exist_ok=True)
    original = next(model.parameters()).dtype
    try:
        model.to(dtype if weights == "fp16" else torch.float32).save_pretrained(dst)
    finally:
        model.to(original)
    if weights == "int8":
        _store_int8(dst / WEIGHTS_NAME)
    for name in TOKENIZER_FILES:
        if not (src / name).is_file():
            continue
        if name == "tokenizer.json":
            _write_compact_json(src / name, dst / name)
        else:
            shutil.copyfile(src / name, dst / name)


def _write_compact_json(src: Path, dst: Path) -> None:
    """Write the JSON document of `src` to `dst` without indentation: the same document
    (`tokenizers` and transformers read it alike), about half the bytes for a tokenizer.json that
    holds a large vocabulary (XLM-R pieces with their scores); package data is counted in bytes."""
    document = json.loads(src.read_text(encoding="utf-8"))
    with atomic_write(dst, "w", encoding="utf-8") as f:
        json.dump(document, f, ensure_ascii=False, separators=(",", ":"))


@dataclass(frozen=True)
class WeightStorage:
    """How a model.safetensors stores its weights: `weights` "int8" (2-D weights as int8 rows,
    `quantize_rows`) or "float", with the float tensors in `dtype`."""

    weights: str
    dtype: torch.dtype


def weight_storage(path: str | Path) -> WeightStorage:
    """The storage of a weights file, so that a command rewriting a model (vocabulary or width
    pruning) writes it the same way: int8 rows stay int8 rows (fp32 would be four times the
    size), fp16 stays fp16. The float dtype is the one most of its float tensors have (a file of
    int8 rows keeps its scales and 1-D tensors in fp32); fp32 for a missing file."""
    from safetensors import safe_open

    path = Path(path)
    if not path.is_file():
        return WeightStorage("float", torch.float32)
    counts: Counter = Counter()
    with safe_open(str(path), "pt") as f:
        int8 = (f.metadata() or {}).get("format") == INT8_FORMAT
        for key in f.keys():
            counts[f.get_slice(key).get_dtype()] += 1
    dtypes = {"F16": torch.float16, "BF16": torch.bfloat16, "F32": torch.float32}
    floats = [(n, d) for d, n in counts.items() if d in dtypes]
    dtype = dtypes[max(floats)[1]] if floats and not int8 else torch.float32
    return WeightStorage("int8" if int8 else "float", dtype)


def save_stored_as(model: PreTrainedEncoder, directory: str | Path, storage: WeightStorage) -> None:
    """`model.save_pretrained(directory)` with its weights stored as `storage` says (the
    caller's model is left in its dtype)."""
    original = next(model.parameters()).dtype
    try:
        model.to(storage.dtype).save_pretrained(directory)
    finally:
        model.to(original)
    if storage.weights == "int8":
        _store_int8(Path(directory) / WEIGHTS_NAME)


def _store_int8(path: Path) -> None:
    """Rewrite a safetensors file with its 2-D weights as int8 rows, atomically."""
    from safetensors.torch import load_file, save

    tensors = quantize_rows(load_file(str(path)))
    with atomic_write(path, "wb") as f:
        f.write(save(tensors, metadata={"format": INT8_FORMAT}))


def file_digests(directory: str | Path) -> dict[str, dict[str, Any]]:
    """{file name: {"sha256", "size"}} of every file directly in `directory`, sorted by name:
    the file list of a hub card's builtin source."""
    out = {}
    for path in sorted(p for p in Path(directory).iterdir() if p.is_file()):
        out[path.name] = {"sha256": sha256_file(path), "size": path.stat().st_size}
    return out
