"""nlp._packing: what the encoder derives from pack_ids agrees with what the collator wrote."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from nlp import _packing
from nlp._common import DataError
from nlp.tokenizer import PackingCollator


def features(lengths):
    """Feature k holds ids 1000*(k+1) + j and the sequence label k."""
    return [{"input_ids": [1000 * (k + 1) + j for j in range(n)], "labels": k} for k, n in enumerate(lengths)]


@settings(max_examples=60, deadline=None)
@given(lengths=st.lists(st.integers(min_value=1, max_value=32), min_size=1, max_size=40),
       strategy=st.sampled_from(["next_fit", "best_fit_decreasing"]))
def test_the_encoder_reads_what_the_collator_wrote(lengths, strategy):
    batch = PackingCollator(32, strategy=strategy)(features(lengths))
    pack = batch["pack_ids"]
    assert torch.equal(_packing.position_ids(pack), batch["position_ids"])
    row, column = _packing.sequence_starts(pack)
    # one start per sequence, in the order of the collator's labels: the [CLS] pooled for label i
    # is the first token of feature labels[i]
    first_tokens = batch["input_ids"][row, column]
    assert first_tokens.tolist() == [1000 * (k + 1) for k in batch["labels"].tolist()]
    cu, longest = _packing.cu_seqlens(pack)
    assert torch.diff(cu).tolist() == [lengths[k] for k in batch["labels"].tolist()]
    assert longest == max(lengths) and cu.dtype == torch.int32
    # cu_seqlens indexes the real tokens flattened row-major
    flat = batch["input_ids"][pack != 0]
    assert flat[cu[:-1].long()].tolist() == first_tokens.tolist()


def test_cu_seqlens_needs_a_matrix():
    with pytest.raises(DataError, match=r"pack_ids should be \(B, T\)"):
        _packing.cu_seqlens(torch.ones(3, dtype=torch.long))
