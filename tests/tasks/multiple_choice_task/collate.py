"""Padding of batch x choices x sequence features."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import torch

from nlp._common import DataError

__all__ = ["MultipleChoiceCollator"]

_PADDED = {"input_ids": None, "attention_mask": 0, "token_type_ids": 0}


@dataclass
class MultipleChoiceCollator:
    pad_token_id: int = 0
    pad_to_multiple_of: int | None = None

    def __call__(self, features: Sequence[dict[str, Any]]) -> dict[str, torch.Tensor]:
        counts = {len(f["input_ids"]) for f in features}
        if len(counts) != 1:
            raise DataError(f"a batch mixes examples with {sorted(counts)} choices; give every example the same "
                            "number (task.num_choices)")
        longest = max(len(row) for f in features for row in f["input_ids"])
        if self.pad_to_multiple_of:
            longest = -(-longest // self.pad_to_multiple_of) * self.pad_to_multiple_of
        out: dict[str, torch.Tensor] = {}
        for key, pad in _PADDED.items():
            if key not in features[0] and key != "attention_mask":
                continue
            value = self.pad_token_id if pad is None else pad
            rows = [[list(r) + [value] * (longest - len(r)) for r in (f[key] if key in f else
                     [[1] * len(x) for x in f["input_ids"]])] for f in features]
            out[key] = torch.tensor(rows, dtype=torch.long)  # (B, C, T)
        if "labels" in features[0]:
            out["labels"] = torch.tensor([int(f["labels"]) for f in features], dtype=torch.long)
        return out
