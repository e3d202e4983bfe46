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


def _steps(per_rank):
    """Per step, the ranks' shares concatenated in rank order."""
    return [[i for share in step for i in share] for step in zip(*per_rank)]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("replicas", [1, 2, 3, 8])
def test_each_rank_takes_its_share_of_every_global_batch(kind, replicas):
    """The plan does not depend on the number of processes: step k on R ranks sees exactly
    global batch k (what one process sees), split in near-equal contiguous shares."""
    samplers = [make(kind, num_replicas=replicas, rank=r, seed=1) for r in range(replicas)]
    one = make(kind, seed=1)
    per_rank = [list(s) for s in samplers]
    assert all(len(p) == len(s) == len(one) for p, s in zip(per_rank, samplers))
    for step, shares, global_batch in zip(_steps(per_rank), zip(*per_rank), list(one)):
        if len(global_batch) >= replicas or kind == "packed":
            assert step == global_batch or kind == "packed"
        assert set(step) == set(global_batch)
    full = [b for b in one.global_batches()[:-1]]  # every batch but the last is complete
    for step, shares in zip(full, zip(*per_rank)):
        sizes = [len(share) for share in shares]
        if kind != "packed":
            assert max(sizes) - min(sizes) <= 1 and sum(sizes) == 32
    counts = collections.Counter(i for p in per_rank for batch in p for i in batch)
    assert set(counts) == set(range(len(LENGTHS))), "nothing lost"
    if kind != "packed":  # the last batch (11 examples) has one for each of up to 8 ranks
        assert all(c == 1 for c in counts.values())


def test_packed_shares_are_whole_bins():
    lengths = [(i * 37) % 50 + 1 for i in range(203)]
    one = PackedBatchSampler(lengths, 64, 8, seed=4)
    two = [PackedBatchSampler(lengths, 64, 8, seed=4, num_replicas=2, rank=r) for r in (0, 1)]
    groups = one._kept_plan(0)
    bins = [b for group in groups for b in group]
    for global_batch, group, a, b in zip(one, groups, *two):
        if len(group) < 2:  # a last batch of one bin: the second rank repeats it
            assert a == b == global_batch
            continue
        assert a + b == global_batch
        assert sum(lengths[i] for i in a) <= 4 * 64 and sum(lengths[i] for i in b) <= 4 * 64
    # a share is a run of complete bins
    starts = {b[0] for b in bins}
    assert all(share[0] in starts for s in two for share in s)


def test_a_last_batch_smaller_than_the_ranks_repeats_one_of_its_items():
    samplers = [DistributedBatchSampler(10, 4, shuffle=False, num_replicas=4, rank=r) for r in range(4)]
    per_rank = [list(s) for s in samplers]
    assert [p[0] for p in per_rank] == [[0], [1], [2], [3]]
    assert [p[-1] for p in per_rank] == [[8], [9], [8], [9]]  # 2 examples for 4 ranks


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("replicas", [1, 3])
def test_drop_last_no_overlap_equal_counts(kind, replicas):
    samplers = [make(kind, num_replicas=replicas, rank=r, drop_last=True) for r in range(replicas)]
    per_rank = [list(s) for s in samplers]
    assert len({len(p) for p in per_rank}) == 1
    flat = [i for p in per_rank for batch in p for i in batch]
    assert len(flat) == len(set(flat)), "no index twice"
    if kind != "packed":
        assert all(len(step) == 32 for step in _steps(per_rank))
        assert len(flat) == len(LENGTHS) // 32 * 32


# The batches of one process, frozen from the samplers as they were before the data-parallel
# rule changed (nlp.train.sampling.RandomBatchSampler for "dynamic"): a run on one process
# must keep its exact batch order, so the README's figures stay the same.
_FROZEN = {
    "dynamic": (26, [[2, 53, 186, 163, 89, 58, 74, 158], [129, 73, 72, 169, 12, 148, 123, 106]],
                "e0f97af0b19e1b14", [[93, 192, 202, 53, 122, 52, 151, 180], [22, 115, 78, 57, 178, 85, 191, 81]],
                "0ce2219d26c72732"),
    "length_grouped": (26, [[27, 177, 127, 77, 154, 54, 4, 104], [198, 25, 75, 125, 175, 202, 2, 52]],
                       "7dfcbba47b006827", [[77, 27, 127, 177, 54, 4, 154, 104], [35, 85, 185, 135, 162, 112, 12, 62]],
                       "4ee78a51ad15accb"),
    "packed": (11, [[47, 179, 62, 164, 35, 191, 136, 90, 27, 49, 189, 87, 135, 141, 174, 2],
                    [36, 190, 43, 133, 9, 17, 58, 118, 93, 83, 154, 22, 31, 145, 185, 91]],
               "aecb987435493e5c",
               [[162, 64, 54, 122, 30, 180, 7, 57, 157, 107, 23, 170, 6, 101, 202, 50, 43, 133, 27, 99, 158, 68],
                [105, 21, 108, 18, 85, 191, 70, 56, 97, 79, 193, 33, 151, 75, 89, 137]],
               "88b99a94b51d01d4"),
}


@pytest.mark.parametrize("batching", sorted(_FROZEN))
def test_one_process_keeps_the_batch_order_it_always_had(batching):
    import hashlib
    import json

    lengths = [(i * 37) % 50 + 1 for i in range(203)]
    sampler = {"dynamic": lambda: DistributedBatchSampler(len(lengths), 8, seed=42),
               "length_grouped": lambda: LengthGroupedBatchSampler(lengths, 8, seed=42),
               "packed": lambda: PackedBatchSampler(lengths, 64, 8, seed=42)}[batching]()
    n, first0, digest0, first1, digest1 = _FROZEN[batching]
    for epoch, first, digest in ((0, first0, digest0), (1, first1, digest1)):
        sampler.set_epoch(epoch)
        batches = list(sampler)
        assert len(batches) == n and batches[:2] == first
        assert hashlib.sha256(json.dumps(batches).encode()).hexdigest()[:16] == digest


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


@pytest.mark.parametrize("kind", KINDS)
def test_a_position_counts_global_batches_for_any_number_of_processes(kind):
    """A run saved on 2 processes resumes on 1 at the same global batch (and vice versa)."""
    two = make(kind, seed=3, num_replicas=2, rank=0)
    two.set_epoch(1)
    it = iter(two)
    for _ in range(5):
        next(it)
    one = make(kind, seed=3)
    one.load_state_dict(two.state_dict())
    reference = make(kind, seed=3)
    reference.set_epoch(1)
    assert list(one) == list(reference)[5:]


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
    kw = dict(seed=seed, drop_last=drop_last, mega_batch_mult=3)
    one = list(LengthGroupedBatchSampler(lengths, bs, **kw))
    per_rank = [list(LengthGroupedBatchSampler(lengths, bs, num_replicas=replicas, rank=r, **kw))
                for r in range(replicas)]
    assert all(len(p) == len(one) for p in per_rank)
    for step, global_batch in zip(_steps(per_rank), one):
        if len(global_batch) >= replicas:
            assert step == global_batch
        else:
            assert set(step) == set(global_batch)
    flat = [i for b in one for i in b]
    if drop_last:
        assert len(flat) == len(set(flat)) and all(len(b) == bs for b in one)
    else:
        assert sorted(flat) == list(range(n))


def test_picklable_and_drives_a_dataloader():
    s = LengthGroupedBatchSampler(LENGTHS[:100], 8, seed=0, num_replicas=2, rank=0)
    t = pickle.loads(pickle.dumps(s))
    assert list(t) == list(s)
    data = [torch.tensor([i]) for i in range(100)]
    loader = torch.utils.data.DataLoader(data, batch_sampler=t, num_workers=2)
    got = [b.view(-1).tolist() for b in loader]
    assert got == list(s)
