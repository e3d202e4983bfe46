"""Release copies of a model directory: what ships as package data (nlp/assets/<name>/).

One implementation for every shipped model, the pretrained ernie-tiny-zh
(`nlp.train.pretrain.export_model`) and the fine-tuned task models (`nlp hub ship`):
the weights cast to fp16 (half the size; `from_pretrained` loads them into fp32 parameters),
config.json as the model class writes it, and the tokenizer files copied byte for byte.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import torch

from nlp._common import sha256_file

from ._modeling import PreTrainedEncoder

__all__ = ["TOKENIZER_FILES", "write_release_copy", "file_digests"]

# the files a tokenizer directory may hold (WordPiece and jieba+BPE hybrid alike)
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt")


def write_release_copy(model: PreTrainedEncoder, src_dir: str | Path, dst_dir: str | Path, *,
                       dtype: torch.dtype = torch.float16) -> None:
    """Write `model` cast to `dtype` (config.json + model.safetensors) into `dst_dir`, and copy
    the tokenizer files `src_dir` holds. The caller's `model` is left as it was."""
    src, dst = Path(src_dir), Path(dst_dir)
    dst.mkdir(parents=True, exist_ok=True)
    original = next(model.parameters()).dtype
    try:
        model.to(dtype).save_pretrained(dst)
    finally:
        model.to(original)
    for name in TOKENIZER_FILES:
        if (src / name).is_file():
            shutil.copyfile(src / name, dst / name)


def file_digests(directory: str | Path) -> dict[str, dict[str, Any]]:
    """{file name: {"sha256", "size"}} of every file directly in `directory`, sorted by name:
    the file list of a hub card's builtin source."""
    out = {}
    for path in sorted(p for p in Path(directory).iterdir() if p.is_file()):
        out[path.name] = {"sha256": sha256_file(path), "size": path.stat().st_size}
    return out
