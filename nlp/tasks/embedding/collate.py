"""Padding of embedding features: (B, T) single texts, or (B, K, T) groups of K texts
(query, positive[, negatives]; a scored pair), with float `labels` (pair scores) when present."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import torch

from nlp._common import DataError

__all__ = ["TextGroupCollator"]

_PADDED = {"input_ids": None, "attention_mask": 0, "token_type_ids": 0}


@dataclass
class TextGroupCollator:
    pad_token_id: int = 0
    pad_to_multiple_of: int | None = None

    def __call__(self, features: Sequence[dict[str, Any]]) -> dict[str, torch.Tensor]:
        if not features:
            raise DataError("an empty batch: the collator needs at least one feature")
        grouped = isinstance(features[0]["input_ids"][0], (list, tuple))
        groups = [f["input_ids"] if grouped else [f["input_ids"]] for f in features]
        sizes = {len(g) for g in groups}
        if len(sizes) != 1:
            raise DataError(f"a batch mixes records of {sorted(sizes)} texts; every record of a split needs "
                            "the same number (query and positive, plus the same number of negatives)")
        longest = max(len(row) for g in groups for row in g)
        if self.pad_to_multiple_of:
            longest = -(-longest // self.pad_to_multiple_of) * self.pad_to_multiple_of
        out: dict[str, torch.Tensor] = {}
        for key, pad in _PADDED.items():
            if key not in features[0] and key != "attention_mask":
                continue
            value = self.pad_token_id if pad is None else pad
            rows = []
            for f, ids in zip(features, groups):
                given = f.get(key)
                if given is None:  # attention over the real tokens
                    given = [[1] * len(r) for r in ids]
                elif not grouped:
                    given = [given]
                rows.append([list(r) + [value] * (longest - len(r)) for r in given])
            tensor = torch.tensor(rows, dtype=torch.long)  # (B, K, T)
            out[key] = tensor if grouped else tensor[:, 0]
        if "labels" in features[0]:
            out["labels"] = torch.tensor([float(f["labels"]) for f in features], dtype=torch.float32)
        return out
