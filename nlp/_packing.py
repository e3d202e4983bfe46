"""The `pack_ids` contract between the packing collator (nlp.tokenizer) and the encoder (nlp.models).

Foundation module: it imports nothing of `nlp` but `nlp._common`, so both layers import it
without importing each other. The collator writes batches that keep this contract; the encoder
reads them through the functions below; nothing else re-derives the layout.

The contract:
    pack_ids: LongTensor (B, T). 0 on padding; on real tokens, k in 1..K_b for the k-th sequence
    of row b (numbered from 1, left to right). The tokens of one sequence are contiguous, the
    sequences of a row are left-aligned with no gap between them, and all padding is at the
    right end of the row. Token i attends to token j iff pack_ids[b, i] == pack_ids[b, j] != 0.
    `attention_mask == (pack_ids != 0)`. `position_ids` restart at 0 with every sequence
    (`position_ids(pack_ids)`; padding gets 0).

    Sequences are numbered in row-major order: row 0's sequences left to right, then row 1's, ...
    Per-sequence outputs (the pooled [CLS] of each sequence: `sequence_starts`) and the
    collator's 1-D sequence `labels` both come in that order, so they line up without
    bookkeeping; varlen attention kernels see the same order (`cu_seqlens`).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from nlp._common import DataError

__all__ = ["cu_seqlens", "position_ids", "sequence_starts"]


def sequence_starts(pack_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(row, column) of the first token of every sequence, each (S,), in row-major order: where
    each sequence's [CLS] is."""
    first = pack_ids.gt(0) & pack_ids.ne(F.pad(pack_ids, (1, 0))[:, :-1])  # (B, T)
    row, column = first.nonzero(as_tuple=True)
    return row, column


def position_ids(pack_ids: torch.Tensor) -> torch.Tensor:
    """(B, T) positions 0, 1, 2, ... restarting at each new sequence of a row (padding gets 0)."""
    B, T = pack_ids.shape
    idx = torch.arange(T, device=pack_ids.device).expand(B, T)
    start = pack_ids.ne(F.pad(pack_ids, (1, 0), value=-1)[:, :-1])  # first token of each run
    start_idx = torch.where(start, idx, torch.zeros_like(idx)).cummax(dim=1).values
    return (idx - start_idx) * pack_ids.gt(0)


def cu_seqlens(pack_ids: torch.Tensor) -> tuple[torch.Tensor, int]:
    """(B, T) pack_ids -> (cu_seqlens int32 (S+1,), max_seqlen) for varlen attention kernels.

    cu_seqlens indexes the real tokens flattened in row-major order (`x[pack_ids != 0]`), the
    layout flash-attn's `flash_attn_varlen_func` expects; sequence n spans
    cu_seqlens[n]:cu_seqlens[n+1].
    """
    if pack_ids.dim() != 2:
        raise DataError(f"pack_ids should be (B, T), got shape {tuple(pack_ids.shape)}")
    counts = torch.zeros(pack_ids.shape[0], int(pack_ids.max().item()) + 1 if pack_ids.numel() else 1,
                         dtype=torch.long, device=pack_ids.device)
    counts.scatter_add_(1, pack_ids.long(), torch.ones_like(pack_ids, dtype=torch.long))
    lengths = counts[:, 1:].reshape(-1)  # row-major: row 0's sequences 1..K, then row 1's ...
    lengths = lengths[lengths > 0]
    cu = torch.zeros(lengths.numel() + 1, dtype=torch.int32, device=pack_ids.device)
    cu[1:] = torch.cumsum(lengths, 0)
    return cu, int(lengths.max().item()) if lengths.numel() else 0
