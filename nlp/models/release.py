"""Release copies of a model directory: what ships as package data (nlp/assets/<name>/).

One implementation for every shipped model, the pretrained ernie-tiny-zh
(`nlp.train.pretrain.export_model`) and the fine-tuned task models (`nlp hub ship`):
the weights cast to fp16 (half the size; `from_pretrained` loads them into fp32 parameters) or,
where the package's size needs it, stored as int8 rows with a scale each (a quarter of fp32),
config.json as the model class writes it, and the tokenizer files copied byte for byte.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import torch

from nlp._common import ConfigError, atomic_write, sha256_file

from ._int8_weights import INT8_FORMAT, quantize_rows
from ._modeling import WEIGHTS_NAME, PreTrainedEncoder

__all__ = ["TOKENIZER_FILES", "WEIGHT_FORMATS", "write_release_copy", "file_digests"]

# the files a tokenizer directory may hold (WordPiece and jieba+BPE hybrid alike)
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt")


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
        if (src / name).is_file():
            shutil.copyfile(src / name, dst / name)


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
