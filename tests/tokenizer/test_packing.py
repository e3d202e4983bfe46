"""PackingCollator and the packing planner: the pack_ids contract, labels order, nothing lost."""

from __future__ import annotations

import pickle

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from nlp._common import DataError
from nlp.tokenizer.collate import PackingCollator, pack_ids_to_cu_seqlens
from nlp.tokenizer.samplers import PackedBatchSampler, plan_packing


def make(lengths, label=True):
    """Feature k holds ids 1000*(k+1) + j, so every token says which feature and position it is."""
    feats = []
    for k, n in enumerate(lengths):
        f = {"input_ids": [1000 * (k + 1) + j for j in range(n)], "token_type_ids": [k % 2] * n}
        if label:
            f["labels"] = k
        feats.append(f)
    return feats


def check_contract(batch, feats, max_length, expected=None):
    """Everything the model and the loss rely on, checked from the tensors alone.

    Returns the feature indices in row-major order; `expected` lists the features the batch
    should hold (default: all of `feats`)."""
    ids, pack, pos, mask = batch["input_ids"], batch["pack_ids"], batch["position_ids"], batch["attention_mask"]
    B, T = ids.shape
    assert T <= max_length
    assert torch.equal(mask, (pack != 0).long())
    seen = []
    for b in range(B):
        row = pack[b].tolist()
        n_real = sum(1 for p in row if p)
        assert all(p == 0 for p in row[n_real:]), "padding only at the right end"
        assert row[:n_real] == sorted(row[:n_real]) and (n_real == 0 or row[0] == 1)
        k = max(row)
        assert set(row[:n_real]) == set(range(1, k + 1)), "ids 1..k, no gap"
        for s in range(1, k + 1):
            cols = [t for t in range(T) if row[t] == s]
            assert cols == list(range(cols[0], cols[-1] + 1)), "a sequence is contiguous"
            assert pos[b, cols].tolist() == list(range(len(cols))), "positions restart at 0"
            toks = ids[b, cols].tolist()
            feature = toks[0] // 1000 - 1
            assert toks == feats[feature]["input_ids"]
            seen.append(feature)
    expected = range(len(feats)) if expected is None else expected
    assert sorted(seen) == sorted(expected), "every sequence exactly once"
    return seen


def test_positions_restart_and_pack_ids():
    feats = make([3, 2, 5, 4])
    batch = PackingCollator(max_length=8, pad_token_id=0)(feats)
    # next_fit in order: 3+2 | 5 (4 does not fit after it) | 4; rows as long as the longest
    assert batch["input_ids"].tolist() == [[1000, 1001, 1002, 2000, 2001],
                                           [3000, 3001, 3002, 3003, 3004],
                                           [4000, 4001, 4002, 4003, 0]]
    assert batch["pack_ids"].tolist() == [[1, 1, 1, 2, 2], [1, 1, 1, 1, 1], [1, 1, 1, 1, 0]]
    assert batch["position_ids"].tolist() == [[0, 1, 2, 0, 1], [0, 1, 2, 3, 4], [0, 1, 2, 3, 0]]
    assert batch["token_type_ids"].tolist() == [[0, 0, 0, 1, 1], [0, 0, 0, 0, 0], [1, 1, 1, 1, 0]]
    assert batch["labels"].tolist() == [0, 1, 2, 3]
    assert set(batch) == {"input_ids", "token_type_ids", "position_ids", "attention_mask", "pack_ids", "labels"}
    check_contract(batch, feats, 8)


def test_fixed_shape_and_multiple_of():
    feats = make([3, 2])
    assert PackingCollator(16, pad_to_max_length=True)(feats)["input_ids"].shape == (1, 16)
    assert PackingCollator(16, pad_to_multiple_of=8)(feats)["input_ids"].shape == (1, 8)


def test_token_labels_and_multilabel():
    feats = [{"input_ids": [1, 2, 3], "labels": [-100, 5, -100]}, {"input_ids": [4, 5], "labels": [6, 7]},
             {"input_ids": [6], "labels": [8]}]
    batch = PackingCollator(4, label_pad_id=-1, pad_to_max_length=True)(feats)
    assert batch["labels"].tolist() == [[-100, 5, -100, -1], [6, 7, 8, -1]]
    multi = PackingCollator(8)([{"input_ids": [1, 2], "labels": [1.0, 0.0]}, {"input_ids": [3], "labels": [0.0, 1.0]}])
    assert multi["labels"].tolist() == [[1.0, 0.0], [0.0, 1.0]] and multi["labels"].dtype == torch.float32


def test_task_type_ids_and_given_position_ids_are_kept():
    feats = [{"input_ids": [1, 2], "task_type_ids": [3, 3], "position_ids": [5, 6]},
             {"input_ids": [3], "task_type_ids": [4], "position_ids": [0]}]
    batch = PackingCollator(8)(feats)
    assert batch["task_type_ids"].tolist() == [[3, 3, 4]]
    assert batch["position_ids"].tolist() == [[5, 6, 0]]


def test_too_long_is_an_error_unless_truncate():
    with pytest.raises(DataError, match=r"feature 1 has 9 tokens, more than max_length=8.*truncate=True"):
        PackingCollator(8)(make([2, 9]))
    batch = PackingCollator(8, truncate=True)([{"input_ids": list(range(1, 10)), "labels": list(range(9))}])
    assert batch["input_ids"].tolist() == [list(range(1, 9))] and batch["labels"].tolist() == [list(range(8))]


def test_bad_features_rejected():
    with pytest.raises(DataError, match="cannot be packed"):
        PackingCollator(8)([{"input_ids": [1], "start_positions": 0, "end_positions": 0}])
    with pytest.raises(DataError, match="feature 0 is already padded"):
        PackingCollator(8)([{"input_ids": [1, 0], "attention_mask": [1, 0]}])
    with pytest.raises(DataError, match="feature 1 has no input_ids"):
        PackingCollator(8)([{"input_ids": [1]}, {"input_ids": []}])
    with pytest.raises(DataError, match=r"strategy='best_fit_decrease'\. Did you mean 'best_fit_decreasing'"):
        PackingCollator(8, strategy="best_fit_decrease")
    with pytest.raises(DataError, match="max_length"):
        PackingCollator(0)
    unknown = r"unknown feature key 'tokentype_ids'\. Did you mean 'token_type_ids'\?.*; add it to drop_keys"
    with pytest.raises(DataError, match=unknown):
        PackingCollator(8)([{"input_ids": [1], "tokentype_ids": [0]}])
    assert "example_id" not in PackingCollator(8)([{"input_ids": [1], "example_id": "a"}])


def test_cu_seqlens():
    pack = torch.tensor([[1, 1, 1, 2, 2, 0], [1, 1, 1, 1, 1, 1], [1, 2, 3, 0, 0, 0]])
    cu, max_len = pack_ids_to_cu_seqlens(pack)
    assert cu.dtype == torch.int32 and cu.tolist() == [0, 3, 5, 11, 12, 13, 14] and max_len == 6
    assert cu[-1].item() == int((pack != 0).sum())


lengths_lists = st.lists(st.integers(min_value=1, max_value=32), min_size=1, max_size=60)


@settings(max_examples=60, deadline=None)
@given(lengths=lengths_lists, strategy=st.sampled_from(["next_fit", "best_fit_decreasing"]))
def test_property_nothing_lost_and_labels_row_major(lengths, strategy):
    feats = make(lengths)
    batch = PackingCollator(32, strategy=strategy)(feats)
    seen = check_contract(batch, feats, 32)
    assert batch["labels"].tolist() == seen, "sequence labels in row-major order"
    if strategy == "next_fit":
        assert seen == list(range(len(feats))), "next_fit keeps the input order"
    cu, _ = pack_ids_to_cu_seqlens(batch["pack_ids"])
    assert torch.diff(cu).tolist() == [lengths[k] for k in seen]


@settings(max_examples=60, deadline=None)
@given(lengths=st.lists(st.integers(min_value=1, max_value=64), min_size=1, max_size=300),
       seed=st.one_of(st.none(), st.integers(0, 2**31)))
def test_property_planner_bins_fit_and_partition(lengths, seed):
    bins = plan_packing(lengths, 64, seed=seed)
    flat = sorted(i for b in bins for i in b)
    assert flat == list(range(len(lengths)))
    assert all(sum(lengths[i] for i in b) <= 64 for b in bins)
    # any-fit: a bin is opened only when its first item fits in no earlier bin, so no two bins
    # together fit in one (hence fewer than 2 * volume + 1 bins)
    loads = sorted(sum(lengths[i] for i in b) for b in bins)
    assert len(loads) < 2 or loads[0] + loads[1] > 64


def test_planner_reproducible_and_varies_by_epoch():
    lengths = [(i * 37) % 50 + 1 for i in range(500)]
    assert plan_packing(lengths, 64, seed=3, epoch=1) == plan_packing(lengths, 64, seed=3, epoch=1)
    assert plan_packing(lengths, 64, seed=3, epoch=1) != plan_packing(lengths, 64, seed=3, epoch=2)
    with pytest.raises(DataError, match=r"lengths\[2\] = 70 exceeds max_length=64"):
        plan_packing([1, 2, 70], 64)
    assert plan_packing([1, 2, 70], 64, truncate=True, seed=None) == [[2], [1, 0]]


@settings(max_examples=25, deadline=None)
@given(lengths=st.lists(st.integers(min_value=1, max_value=16), min_size=1, max_size=120),
       rows=st.integers(1, 6), replicas=st.integers(1, 3))
def test_property_sampler_plus_collator_rows_bounded(lengths, rows, replicas):
    feats = make(lengths)
    all_seen = []
    for rank in range(replicas):
        sampler = PackedBatchSampler(lengths, 16, rows, seed=1, num_replicas=replicas, rank=rank)
        for batch_idx in sampler:
            batch = PackingCollator(16)([feats[i] for i in batch_idx])
            assert batch["input_ids"].shape[0] <= rows, "next_fit never needs more rows than bins"
            all_seen += check_contract(batch, feats, 16, expected=batch_idx)
    assert set(all_seen) == set(range(len(lengths)))
    if replicas == 1:
        assert sorted(all_seen) == list(range(len(lengths)))


def test_picklable_in_dataloader_workers():
    lengths = [(i * 7) % 13 + 1 for i in range(60)]
    feats = make(lengths)
    c = PackingCollator(16)
    assert pickle.loads(pickle.dumps(c)) == c
    sampler = PackedBatchSampler(lengths, 16, 4, seed=0)
    sampler = pickle.loads(pickle.dumps(sampler))
    loader = torch.utils.data.DataLoader(feats, batch_sampler=sampler, collate_fn=c, num_workers=2)
    total = sum(int(b["attention_mask"].sum()) for b in loader)
    assert total == sum(lengths)
