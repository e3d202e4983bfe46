"""Padding of reranking features: (B, G, T) query groups (positive first, then its negatives) with
(B, G) relevance labels, or (B, T) single pairs (the pipeline, export checks)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import torch

from nlp.tasks.embedding.collate import TextGroupCollator

__all__ = ["RankingCollator"]


@dataclass
class RankingCollator:
    pad_token_id: int = 0
    pad_to_multiple_of: int | None = None

    def __call__(self, features: Sequence[dict[str, Any]]) -> dict[str, torch.Tensor]:
        inputs = [{k: v for k, v in f.items() if k != "labels"} for f in features]
        out = TextGroupCollator(self.pad_token_id, self.pad_to_multiple_of)(inputs)
        if features and "labels" in features[0]:
            out["labels"] = torch.tensor([list(f["labels"]) for f in features], dtype=torch.float32)  # (B, G)
        return out
