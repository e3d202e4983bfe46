"""What every caller of a task model agrees on: the input names, a feature's length, the name of
an export directory's manifest. One home, so that the pipelines, the trainer's evaluation and
distillation, ONNX export and the directory lookups cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["MODEL_INPUTS", "EXPORT_MANIFEST", "feature_length"]

# The batch keys a model's forward takes from a feature, in the order an export lists its
# inputs (ONNX input order: exports already made keep it).
MODEL_INPUTS = ("input_ids", "attention_mask", "token_type_ids")

# The file `nlp export` writes into an export directory (nlp/deploy/manifest.py); a directory
# holding it is an export, run on onnxruntime, never loaded as a PyTorch model.
EXPORT_MANIFEST = "manifest.json"


def feature_length(feature: Mapping[str, Any]) -> int:
    """A feature's size in tokens: its `input_ids`' length, or the longest row of a feature that
    groups several sequences (a multiple-choice example's choices). Batching, packing and the
    pipelines' shortest-first order all sort by it."""
    ids = feature["input_ids"]
    if len(ids) and isinstance(ids[0], (list, tuple)) or getattr(ids, "ndim", 1) > 1:
        return max((len(r) for r in ids), default=0)
    return len(ids)
