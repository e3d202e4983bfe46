"""Batch samplers: reproducible, sharded across data-parallel ranks, resumable mid-epoch.

The one sampler family of the toolkit (the trainer builds its training sampler from these).
Every training sampler plans one epoch as a list of GLOBAL batches from (seed, epoch) alone,
the same whatever the number of processes, so every rank computes the same plan without
communicating; then each rank takes its share of every global batch:

* `DistributedBatchSampler`: plain random (or sequential) batches of examples.
* `LengthGroupedBatchSampler`: batches of similar lengths in shuffled order (little padding).
* `PackedBatchSampler`: batches of bins planned by bin packing, for `PackingCollator`; a rank's
  share is a share of the bins (the rows) of the global batch.

Sharding: `batch_size` (`rows_per_batch` for packing) is global. Rank r of R takes the r-th
of R contiguous, near-equal slices of each global batch (sizes differ by at most one; with
`batch_size` divisible by R every full batch splits evenly). So step k sees the same examples
on 1 or R processes: what lets data-parallel training optimise like one process. Every rank
yields as many batches as the plan has global batches. A last global batch with fewer items
than ranks leaves some ranks no item of their own: they repeat one item of that batch (a
process without data would hang the others). drop_last=True drops a short last global batch.

Resume: a position is a number of global batches (the same on every rank, and valid for any
number of processes). `state_dict()` records (epoch, position); after `load_state_dict()` the
next iteration yields the rest of the epoch. A DataLoader with workers pulls batches ahead of
the training loop, so pass the number of batches really finished:
`state_dict(position=batches_done)`. `skip_batches` does the same for any batch sampler.

`SequentialShardSampler` is the evaluation order (no shuffling, each rank a stride of the data).
"""

from __future__ import annotations

import itertools
from typing import Any, Iterator, Protocol, Sequence, Sized

import numpy as np
import torch

from nlp._common import DataError
from nlp.tokenizer.collate import best_fit_decreasing

__all__ = [
    "EpochBatchSampler",
    "DistributedBatchSampler",
    "LengthGroupedBatchSampler",
    "PackedBatchSampler",
    "SequentialShardSampler",
    "plan_packing",
    "skip_batches",
]


class EpochBatchSampler(Protocol):
    """What the trainer needs of a batch sampler: index lists for THIS process, in an order
    that depends on (seed, epoch) only, and the same number of batches on every process."""

    def set_epoch(self, epoch: int) -> None: ...
    def __iter__(self) -> Iterator[list[int]]: ...
    def __len__(self) -> int: ...


def _rng(seed: int, epoch: int) -> np.random.Generator:
    # PCG64 seeded from the pair: stable across platforms and numpy versions (NEP 19).
    return np.random.default_rng([int(seed), int(epoch)])


def _check_lengths(lengths: Sequence[int], who: str, minimum: int = 0) -> list[int]:
    out = [int(n) for n in lengths]
    for i, n in enumerate(out):
        if n < minimum:
            raise DataError(f"{who}: lengths[{i}] = {n}; lengths must be >= {minimum}")
    return out


def _share(batch: list[Any], rank: int, num_replicas: int) -> list[Any]:
    """Rank's contiguous slice of a global batch: near-equal sizes, the larger ones first
    (numpy.array_split's rule); an empty slice becomes one item of the batch, repeated."""
    size, extra = divmod(len(batch), num_replicas)
    start = rank * size + min(rank, extra)
    mine = batch[start : start + size + (rank < extra)]
    return mine if mine else [batch[rank % len(batch)]]


class _GlobalBatchSampler:
    """Epochs, sharding and resume; subclasses implement `_plan(epoch)` -> global batches of
    items (an item is an index, or a bin of indices for packing; see `_indices`)."""

    def __init__(self, num_samples: int, items_per_batch: int, *, shuffle: bool, seed: int,
                 num_replicas: int, rank: int, drop_last: bool) -> None:
        who = type(self).__name__
        if num_replicas < 1:
            raise DataError(f"{who}: num_replicas={num_replicas}; use the data-parallel world size (>= 1)")
        if not 0 <= rank < num_replicas:
            raise DataError(f"{who}: rank={rank} is outside 0..{num_replicas - 1} (num_replicas={num_replicas})")
        if num_samples < 1:
            raise DataError(f"{who}: the dataset is empty; nothing to sample")
        self.num_samples = num_samples
        self.items_per_batch = int(items_per_batch)
        self.shuffle = bool(shuffle)
        self.seed = int(seed)
        self.num_replicas = int(num_replicas)
        self.rank = int(rank)
        self.drop_last = bool(drop_last)
        self.epoch = 0
        self._position = 0  # global batches of this epoch already yielded
        self._resume_from = 0  # set by load_state_dict; the next iteration starts there
        self._cached: tuple[int, list[list[Any]]] | None = None

    # subclasses -----------------------------------------------------------------------------
    def _plan(self, epoch: int) -> list[list[Any]]:
        raise NotImplementedError

    def _indices(self, items: list[Any]) -> list[int]:
        """Dataset indices of a rank's share (items are indices unless a subclass says not)."""
        return [int(i) for i in items]

    # shared ---------------------------------------------------------------------------------
    def global_batches(self, epoch: int | None = None) -> list[list[int]]:
        """The epoch's global batches as index lists (what one process would take), after
        drop_last: the plan every rank shares."""
        return [self._indices(b) for b in self._kept_plan(self.epoch if epoch is None else epoch)]

    def _kept_plan(self, epoch: int) -> list[list[Any]]:
        if self._cached is None or self._cached[0] != epoch:
            plan = self._plan(epoch)
            if self.drop_last and plan and len(plan[-1]) < self.items_per_batch:
                plan = plan[:-1]
            self._cached = (epoch, plan)
        return self._cached[1]

    def set_epoch(self, epoch: int) -> None:
        """Select the epoch's plan (call before each epoch, as with DistributedSampler)."""
        if epoch != self.epoch:
            self._resume_from = self._position = 0  # a loaded position belongs to its epoch
        self.epoch = int(epoch)

    def __iter__(self) -> Iterator[list[int]]:
        plan = self._kept_plan(self.epoch)
        start, self._resume_from = self._resume_from, 0
        self._position = start
        for k in range(start, len(plan)):
            self._position = k + 1
            yield self._indices(_share(plan[k], self.rank, self.num_replicas))

    def __len__(self) -> int:
        """Batches per rank in a full epoch (= global batches; after a resume, iteration
        yields the rest only)."""
        return len(self._kept_plan(self.epoch))

    def _fingerprint(self) -> dict[str, Any]:
        # Not the rank nor the number of processes: a position counts global batches.
        return {"num_samples": self.num_samples, "seed": self.seed, "shuffle": self.shuffle,
                "drop_last": self.drop_last}

    def state_dict(self, position: int | None = None) -> dict[str, Any]:
        """Where the run is: epoch and global batches done. Pass `position` = batches the loop
        finished when a DataLoader prefetches (its sampler runs ahead of training)."""
        pos = self._position if position is None else int(position)
        return {"epoch": self.epoch, "position": pos, **self._fingerprint()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Resume: the next iteration yields the batches after `position` of `epoch`."""
        who = type(self).__name__
        mine = self._fingerprint()
        diff = {k: (state[k], v) for k, v in mine.items() if k in state and state[k] != v}
        if diff:
            detail = ", ".join(f"{k}: saved {a!r}, now {b!r}" for k, (a, b) in diff.items())
            raise DataError(
                f"{who}: the saved sampler state does not match this sampler ({detail}); the "
                "remaining batches would differ. Resume with the same data and settings."
            )
        self.epoch = int(state["epoch"])
        pos = int(state["position"])
        n = len(self._kept_plan(self.epoch))
        if not 0 <= pos <= n:
            raise DataError(f"{who}: saved position {pos} is outside 0..{n} for epoch {self.epoch}")
        self._position = self._resume_from = pos


def _num_samples(data: int | Sized) -> int:
    return int(data) if isinstance(data, int) else len(data)


class DistributedBatchSampler(_GlobalBatchSampler):
    """Random (shuffle=True) or in-order global batches of `batch_size`, sharded and resumable.

    `data` is the dataset (anything with len()) or its size. Use shuffle=False for evaluation.
    The order is torch.randperm seeded with seed * 1_000_003 + epoch (the trainer's "dynamic"
    batching has always drawn it so).
    """

    def __init__(self, data: int | Sized, batch_size: int, *, shuffle: bool = True, seed: int = 0,
                 num_replicas: int = 1, rank: int = 0, drop_last: bool = False) -> None:
        if batch_size < 1:
            raise DataError(f"{type(self).__name__}: batch_size={batch_size}; use a positive int")
        self.batch_size = int(batch_size)
        super().__init__(_num_samples(data), batch_size, shuffle=shuffle, seed=seed,
                         num_replicas=num_replicas, rank=rank, drop_last=drop_last)

    def _plan(self, epoch: int) -> list[list[int]]:
        if self.shuffle:
            g = torch.Generator().manual_seed(self.seed * 1_000_003 + epoch)
            order = torch.randperm(self.num_samples, generator=g).tolist()
        else:
            order = list(range(self.num_samples))
        return [order[i : i + self.batch_size] for i in range(0, len(order), self.batch_size)]

    def _fingerprint(self) -> dict[str, Any]:
        return {**super()._fingerprint(), "batch_size": self.batch_size}


class LengthGroupedBatchSampler(_GlobalBatchSampler):
    """Global batches of similar lengths, in shuffled order.

    Per epoch: shuffle the indices, cut them into mega-batches of `mega_batch_mult *
    batch_size`, sort each mega-batch by length (longest first), cut it into batches, then
    shuffle the batches. A larger mega_batch_mult means less padding and less randomness
    (transformers' `get_length_grouped_indices` uses 50). The batch with the longest sequence
    goes first, so an out-of-memory shows at step 0, not hours later. A rank's share of a
    batch is a contiguous run of it, so it holds similar lengths too.
    shuffle=False sorts the whole dataset by length (for evaluation).
    """

    def __init__(self, lengths: Sequence[int], batch_size: int, *, shuffle: bool = True, seed: int = 0,
                 num_replicas: int = 1, rank: int = 0, drop_last: bool = False,
                 mega_batch_mult: int = 50) -> None:
        who = type(self).__name__
        if batch_size < 1:
            raise DataError(f"{who}: batch_size={batch_size}; use a positive int")
        if mega_batch_mult < 1:
            raise DataError(f"{who}: mega_batch_mult={mega_batch_mult}; use a positive int")
        self.lengths = _check_lengths(lengths, who)
        self.batch_size = int(batch_size)
        self.mega_batch_mult = int(mega_batch_mult)
        super().__init__(len(self.lengths), batch_size, shuffle=shuffle, seed=seed,
                         num_replicas=num_replicas, rank=rank, drop_last=drop_last)

    def _plan(self, epoch: int) -> list[list[int]]:
        lengths, bs = self.lengths, self.batch_size
        if not self.shuffle:
            order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
            return [order[i : i + bs] for i in range(0, len(order), bs)]
        rng = _rng(self.seed, epoch)
        perm = rng.permutation(len(lengths)).tolist()
        mega = self.mega_batch_mult * bs  # a multiple of bs: only the very last batch can be short
        batches: list[list[int]] = []
        for m in range(0, len(perm), mega):
            chunk = sorted(perm[m : m + mega], key=lambda i: -lengths[i])
            batches += [chunk[i : i + bs] for i in range(0, len(chunk), bs)]
        last = batches.pop() if len(batches[-1]) < bs else None
        batches = [batches[i] for i in rng.permutation(len(batches)).tolist()]
        if batches:  # the longest batch first, for an early out-of-memory
            first = min(range(len(batches)), key=lambda b: -lengths[batches[b][0]])
            batches.insert(0, batches.pop(first))
        if last is not None:
            batches.append(last)  # the short batch stays last, where drop_last finds it
        return batches

    def _fingerprint(self) -> dict[str, Any]:
        return {**super()._fingerprint(), "batch_size": self.batch_size, "mega_batch_mult": self.mega_batch_mult}


def plan_packing(lengths: Sequence[int], max_length: int, *, seed: int | None = 0, epoch: int = 0,
                 truncate: bool = False) -> list[list[int]]:
    """Plan bins (lists of indices, each summing to <= max_length) with best-fit decreasing.

    seed=None: deterministic ties (by index), bins in length order. Otherwise equal lengths are
    tie-broken by a permutation from (seed, epoch), giving different bins each epoch, and the
    bins come in shuffled order. Each index appears in exactly one bin. Lengths above
    max_length are an error unless truncate=True (they then count as max_length, as
    `PackingCollator(truncate=True)` cuts them).
    """
    who = "plan_packing"
    if not isinstance(max_length, int) or max_length < 1:
        raise DataError(f"{who}: max_length={max_length!r}; use a positive int")
    lens = _check_lengths(lengths, who, minimum=1)
    for i, n in enumerate(lens):
        if n > max_length:
            if not truncate:
                raise DataError(
                    f"{who}: lengths[{i}] = {n} exceeds max_length={max_length}; truncate when "
                    "tokenizing, or pass truncate=True"
                )
            lens[i] = max_length
    if seed is None:
        return best_fit_decreasing(lens, max_length)
    rng = _rng(seed, epoch)
    bins = best_fit_decreasing(lens, max_length, order=rng.permutation(len(lens)).tolist())
    return [bins[b] for b in rng.permutation(len(bins)).tolist()]


class PackedBatchSampler(_GlobalBatchSampler):
    """Global batches of `rows_per_batch` packed bins, for `PackingCollator`.

    Each rank's share is a run of the global batch's bins (rows_per_batch / R of them); it
    yields their indices, bin after bin, and a `PackingCollator` with the default
    strategy="next_fit" and the same max_length packs them into at most that many rows.
    Bins are re-planned each epoch from (seed, epoch) when shuffle=True; drop_last drops a
    last global batch of fewer bins.
    """

    def __init__(self, lengths: Sequence[int], max_length: int, rows_per_batch: int, *, shuffle: bool = True,
                 seed: int = 0, num_replicas: int = 1, rank: int = 0, drop_last: bool = False,
                 truncate: bool = False) -> None:
        who = type(self).__name__
        if rows_per_batch < 1:
            raise DataError(f"{who}: rows_per_batch={rows_per_batch}; use a positive int")
        self.lengths = _check_lengths(lengths, who, minimum=1)
        self.max_length = int(max_length)
        self.rows_per_batch = int(rows_per_batch)
        self.truncate = bool(truncate)
        super().__init__(len(self.lengths), rows_per_batch, shuffle=shuffle, seed=seed,
                         num_replicas=num_replicas, rank=rank, drop_last=drop_last)

    def _plan(self, epoch: int) -> list[list[list[int]]]:
        bins = plan_packing(self.lengths, self.max_length, seed=self.seed if self.shuffle else None,
                            epoch=epoch, truncate=self.truncate)
        r = self.rows_per_batch
        return [bins[i : i + r] for i in range(0, len(bins), r)]

    def _indices(self, items: list[list[int]]) -> list[int]:
        return [int(i) for b in items for i in b]

    def _fingerprint(self) -> dict[str, Any]:
        return {**super()._fingerprint(), "max_length": self.max_length, "rows_per_batch": self.rows_per_batch}


class SequentialShardSampler:
    """Evaluation order: examples strided over processes (rank r gets examples r, r+W, r+2W, ...),
    in batches of consecutive indices; with `lengths`, each rank's share is sorted longest first
    so that a batch holds examples of similar length (little padding: about half the compute of
    dataset order on review-like data). The caller puts predictions back in dataset order."""

    def __init__(self, num_examples: int, batch_size: int, *, num_replicas: int = 1, rank: int = 0,
                 lengths: Sequence[int] | None = None):
        self.indices = list(range(rank, num_examples, num_replicas))
        if lengths is not None:
            if len(lengths) != num_examples:
                raise DataError(f"SequentialShardSampler: got {len(lengths)} lengths for {num_examples} examples")
            self.indices.sort(key=lambda i: -lengths[i])  # stable: ties keep dataset order
        self.batch_size = batch_size

    def set_epoch(self, epoch: int) -> None:  # order never changes
        pass

    def __len__(self) -> int:
        return -(-len(self.indices) // self.batch_size)

    def __iter__(self) -> Iterator[list[int]]:
        for i in range(0, len(self.indices), self.batch_size):
            yield self.indices[i : i + self.batch_size]


class skip_batches:
    """Wrap any batch sampler so that its next iteration drops the first `n` batches.

    Used once, for the epoch a run resumes in (n = global batches done: with the samplers
    above, the same on every rank); later epochs iterate the wrapped sampler whole.
    """

    def __init__(self, sampler: EpochBatchSampler, n: int) -> None:
        self.sampler, self.n = sampler, n

    def set_epoch(self, epoch: int) -> None:
        self.sampler.set_epoch(epoch)

    def __len__(self) -> int:
        return max(0, len(self.sampler) - self.n)

    def __iter__(self) -> Iterator[list[int]]:
        n, self.n = self.n, 0
        return itertools.islice(iter(self.sampler), n, None)
