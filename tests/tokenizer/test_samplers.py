"""Batch samplers: reproducible, exact coverage across ranks, length grouping, exact resume."""

from __future__ import annotations

import collections
import pickle
import random

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from nlp._common import DataError
from nlp.tokenizer.samplers import DistributedBatchSampler, LengthGroupedBatchSampler, PackedBatchSampler

_rng = random.Random(0)
LENGTHS = [_rng.randint(1, 128) for _ in range(1003)]


def make(kind, **kw):
    if kind == "grouped":
        return LengthGroupedBatchSampler(LENGTHS, 32, mega_batch_mult=8, **kw)
    if kind == "random":
        return DistributedBatchSampler(len(LENGTHS), 32, **kw)
    return PackedBatchSampler(LENGTHS, 128, 8, **kw)


KINDS = ["grouped", "random", "packed"]


@pytest.mark.parametrize("kind", KINDS)
def test_reproducible_and_epoch_dependent(kind):
    a, b = make(kind, seed=5), make(kind, seed=5)
    assert list(a) == list(b)
    a.set_epoch(1)
    assert list(a) != list(b)
    b.set_epoch(1)
    assert list(a) == list(b)
    assert list(make(kind, seed=6)) != list(make(kind, seed=5))


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("replicas", [1, 2, 3, 8])
def test_every_index_exactly_once_across_ranks(kind, replicas):
    """drop_last=False: ranks get equal batch counts; only DistributedSampler-style repeats."""
    samplers = [make(kind, num_replicas=replicas, rank=r, seed=1) for r in range(replicas)]
    per_rank = [list(s) for s in samplers]
    assert len({len(p) for p in per_rank}) == 1 and all(len(p) == len(s) for p, s in zip(per_rank, samplers))
    counts = collections.Counter(i for p in per_rank for batch in p for i in batch)
    assert set(counts) == set(range(len(LENGTHS))), "nothing lost"
    n_global = len(samplers[0]._global_batches(0))
    repeated = samplers[0]._global_batches(0)[: (-n_global) % replicas]
    expected = collections.Counter(range(len(LENGTHS))) + collections.Counter(i for b in repeated for i in b)
    assert counts == expected, "duplicates only in the repeated padding batches"
    if replicas == 1:
        assert all(c == 1 for c in counts.values())


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("replicas", [1, 3])
def test_drop_last_no_overlap_equal_counts(kind, replicas):
    samplers = [make(kind, num_replicas=replicas, rank=r, drop_last=True) for r in range(replicas)]
    per_rank = [list(s) for s in samplers]
    assert len({len(p) for p in per_rank}) == 1
    flat = [i for p in per_rank for batch in p for i in batch]
    assert len(flat) == len(set(flat)), "no index twice"
    if kind != "packed":
        assert all(len(batch) == 32 for p in per_rank for batch in p)
        n_full = len(LENGTHS) // 32
        assert len(flat) == n_full // replicas * replicas * 32


def test_batches_grouped_by_length():
    s = LengthGroupedBatchSampler(LENGTHS, 32, seed=0)
    batches = list(s)
    spread = sum(max(LENGTHS[i] for i in b) - min(LENGTHS[i] for i in b) for b in batches) / len(batches)
    assert spread < 10, f"mean in-batch length spread {spread} (random batches: ~120)"
    assert max(LENGTHS[i] for i in batches[0]) == max(LENGTHS), "the longest batch comes first"
    # shuffled order: the batch maxima are not monotone
    maxima = [max(LENGTHS[i] for i in b) for b in batches[1:-1]]
    assert maxima != sorted(maxima) and maxima != sorted(maxima, reverse=True)
    ordered = list(LengthGroupedBatchSampler(LENGTHS, 32, shuffle=False))
    assert [LENGTHS[i] for b in ordered for i in b] == sorted(LENGTHS, reverse=True)


def test_random_sampler_shuffle_false_is_sequential():
    batches = list(DistributedBatchSampler(list(range(10)), 4, shuffle=False))
    assert batches == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert list(DistributedBatchSampler(10, 4, shuffle=False, drop_last=True)) == [[0, 1, 2, 3], [4, 5, 6, 7]]


@pytest.mark.parametrize("kind", KINDS)
def test_resume_mid_epoch_gives_exact_rest(kind):
    ref = make(kind, seed=3, num_replicas=2, rank=1)
    ref.set_epoch(2)
    full = list(ref)
    run = make(kind, seed=3, num_replicas=2, rank=1)
    run.set_epoch(2)
    it = iter(run)
    done = [next(it) for _ in range(5)]
    state = run.state_dict()
    assert state["epoch"] == 2 and state["position"] == 5
    state = pickle.loads(pickle.dumps(state))  # checkpoints serialise it
    resumed = make(kind, seed=3, num_replicas=2, rank=1)
    resumed.load_state_dict(state)
    resumed.set_epoch(2)  # the trainer calls set_epoch again on resume: keeps the position
    rest = list(resumed)
    assert done + rest == full
    assert list(resumed) == full, "the following iteration is a whole epoch again"
    resumed.set_epoch(3)
    assert len(list(resumed)) == len(resumed)


def test_resume_with_explicit_position_and_epoch_change_resets():
    s = LengthGroupedBatchSampler(LENGTHS, 32)
    full = list(s)
    t = LengthGroupedBatchSampler(LENGTHS, 32)
    t.load_state_dict(s.state_dict(position=7))
    assert list(t) == full[7:]
    u = LengthGroupedBatchSampler(LENGTHS, 32)
    u.load_state_dict({**s.state_dict(position=7)})
    u.set_epoch(1)  # a loaded position belongs to its own epoch
    assert len(list(u)) == len(u)


def test_resume_rejects_a_different_sampler():
    state = LengthGroupedBatchSampler(LENGTHS, 32, seed=1).state_dict(position=3)
    with pytest.raises(DataError, match=r"seed: saved 1, now 2"):
        LengthGroupedBatchSampler(LENGTHS, 32, seed=2).load_state_dict(state)
    with pytest.raises(DataError, match=r"batch_size: saved 32, now 16"):
        LengthGroupedBatchSampler(LENGTHS, 16, seed=1).load_state_dict(state)
    with pytest.raises(DataError, match=r"position 999 is outside"):
        LengthGroupedBatchSampler(LENGTHS, 32, seed=1).load_state_dict({**state, "position": 999})


def test_bad_arguments():
    with pytest.raises(DataError, match=r"rank=2 is outside 0..1"):
        DistributedBatchSampler(10, 2, num_replicas=2, rank=2)
    with pytest.raises(DataError, match="batch_size=0"):
        LengthGroupedBatchSampler([1, 2], 0)
    with pytest.raises(DataError, match="empty"):
        DistributedBatchSampler(0, 2)
    with pytest.raises(DataError, match=r"lengths\[1\] = -3"):
        LengthGroupedBatchSampler([1, -3], 2)
    with pytest.raises(DataError, match=r"lengths\[0\] = 300 exceeds max_length=128"):
        list(PackedBatchSampler([300], 128, 2))


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 200), bs=st.integers(1, 17), replicas=st.integers(1, 5), seed=st.integers(0, 99),
       drop_last=st.booleans())
def test_property_grouped_coverage(n, bs, replicas, seed, drop_last):
    lengths = [(i * 31 + seed) % 40 for i in range(n)]
    per_rank = [list(LengthGroupedBatchSampler(lengths, bs, seed=seed, num_replicas=replicas, rank=r,
                                               drop_last=drop_last, mega_batch_mult=3)) for r in range(replicas)]
    assert len({len(p) for p in per_rank}) == 1
    flat = [i for p in per_rank for b in p for i in b]
    if drop_last:
        assert len(flat) == len(set(flat)) and all(len(b) == bs for p in per_rank for b in p)
    else:
        assert set(flat) == set(range(n))
        if n % (bs * replicas) == 0:
            assert sorted(flat) == list(range(n))


def test_picklable_and_drives_a_dataloader():
    s = LengthGroupedBatchSampler(LENGTHS[:100], 8, seed=0, num_replicas=2, rank=0)
    t = pickle.loads(pickle.dumps(s))
    assert list(t) == list(s)
    data = [torch.tensor([i]) for i in range(100)]
    loader = torch.utils.data.DataLoader(data, batch_sampler=t, num_workers=2)
    got = [b.view(-1).tolist() for b in loader]
    assert got == list(s)
