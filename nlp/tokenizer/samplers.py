"""Batch samplers: reproducible, sharded across data-parallel ranks, resumable mid-epoch.

All three samplers plan one epoch as a list of global batches (lists of dataset indices) from
(seed, epoch) alone, so every rank computes the same plan without communicating, then take
their share:

* `DistributedBatchSampler`: plain random (or sequential) batches, as paddle.io's namesake.
* `LengthGroupedBatchSampler`: batches of similar lengths in shuffled order (little padding).
* `PackedBatchSampler`: bins of sequences planned by bin packing, for `PackingCollator`.

Sharding: rank r takes global batches r, r + R, r + 2R, ... (R = num_replicas). When the
number of batches is not a multiple of R:
  - drop_last=False: the plan is padded by repeating its first batches (as torch's
    DistributedSampler repeats samples), so every rank gets ceil(n_batches / R) batches and
    every index appears at least once; only those repeated batches hold duplicates. With R=1
    nothing is repeated: every index exactly once.
  - drop_last=True: the incomplete last batch is dropped, then the trailing batches that do
    not fill a round of R, so nothing repeats and every rank gets n_batches // R.

Resume: `state_dict()` records (epoch, position = batches this rank has yielded in the
epoch); after `load_state_dict()`, the next iteration yields exactly the remaining batches.
A DataLoader with workers pulls batches ahead of the training loop, so the trainer should
pass the number of steps it really finished: `state_dict(position=steps_done_in_epoch)`.
"""

from __future__ import annotations

from typing import Any, Iterator, Sequence, Sized

import numpy as np

from nlp._common import DataError
from nlp.tokenizer.collate import _best_fit_decreasing

__all__ = [
    "DistributedBatchSampler",
    "LengthGroupedBatchSampler",
    "PackedBatchSampler",
    "plan_packing",
]


def _rng(seed: int, epoch: int) -> np.random.Generator:
    # PCG64 seeded from the pair: stable across platforms and numpy versions (NEP 19).
    return np.random.default_rng([int(seed), int(epoch)])


def _check_lengths(lengths: Sequence[int], who: str, minimum: int = 0) -> list[int]:
    out = [int(n) for n in lengths]
    for i, n in enumerate(out):
        if n < minimum:
            raise DataError(f"{who}: lengths[{i}] = {n}; lengths must be >= {minimum}")
    return out


class _ShardedBatchSampler:
    """Sharding, epochs and resume; subclasses implement `_plan(epoch)` -> global batches."""

    def __init__(self, num_samples: int, *, shuffle: bool, seed: int, num_replicas: int, rank: int,
                 drop_last: bool) -> None:
        who = type(self).__name__
        if num_replicas < 1:
            raise DataError(f"{who}: num_replicas={num_replicas}; use the data-parallel world size (>= 1)")
        if not 0 <= rank < num_replicas:
            raise DataError(f"{who}: rank={rank} is outside 0..{num_replicas - 1} (num_replicas={num_replicas})")
        if num_samples < 1:
            raise DataError(f"{who}: the dataset is empty; nothing to sample")
        self.num_samples = num_samples
        self.shuffle = bool(shuffle)
        self.seed = int(seed)
        self.num_replicas = int(num_replicas)
        self.rank = int(rank)
        self.drop_last = bool(drop_last)
        self.epoch = 0
        self._position = 0  # batches of this epoch already yielded on this rank
        self._resume_from = 0  # set by load_state_dict; the next iteration starts there
        self._cached: tuple[int, list[list[int]]] | None = None

    # subclasses -----------------------------------------------------------------------------
    def _plan(self, epoch: int) -> list[list[int]]:
        raise NotImplementedError

    def _is_incomplete(self, batch: list[int]) -> bool:
        """Whether drop_last should drop this (last) batch."""
        raise NotImplementedError

    # shared ---------------------------------------------------------------------------------
    def _global_batches(self, epoch: int) -> list[list[int]]:
        if self._cached is None or self._cached[0] != epoch:
            self._cached = (epoch, self._plan(epoch))
        return self._cached[1]

    def _rank_batches(self, epoch: int) -> list[list[int]]:
        batches = list(self._global_batches(epoch))
        R = self.num_replicas
        if self.drop_last:
            if batches and self._is_incomplete(batches[-1]):
                batches.pop()
            batches = batches[: len(batches) // R * R]
        elif len(batches) % R:
            missing = R - len(batches) % R
            batches += [batches[i % len(batches)] for i in range(missing)]
        return batches[self.rank :: R]

    def set_epoch(self, epoch: int) -> None:
        """Select the epoch's plan (call before each epoch, as with DistributedSampler)."""
        if epoch != self.epoch:
            self._resume_from = self._position = 0  # a loaded position belongs to its epoch
        self.epoch = int(epoch)

    def __iter__(self) -> Iterator[list[int]]:
        batches = self._rank_batches(self.epoch)
        start, self._resume_from = self._resume_from, 0
        self._position = start
        for k in range(start, len(batches)):
            self._position = k + 1
            yield list(batches[k])

    def __len__(self) -> int:
        """Batches per rank in a full epoch (after a resume, iteration yields the rest only)."""
        return len(self._rank_batches(self.epoch))

    def _fingerprint(self) -> dict[str, Any]:
        return {"num_samples": self.num_samples, "seed": self.seed, "num_replicas": self.num_replicas,
                "rank": self.rank, "shuffle": self.shuffle, "drop_last": self.drop_last}

    def state_dict(self, position: int | None = None) -> dict[str, Any]:
        """Where this rank is: epoch and batches done. Pass `position` = steps the loop finished
        when a DataLoader prefetches (its sampler runs ahead of training)."""
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
        n = len(self._rank_batches(self.epoch))
        if not 0 <= pos <= n:
            raise DataError(f"{who}: saved position {pos} is outside 0..{n} for epoch {self.epoch}")
        self._position = self._resume_from = pos


def _num_samples(data: int | Sized) -> int:
    return int(data) if isinstance(data, int) else len(data)


class DistributedBatchSampler(_ShardedBatchSampler):
    """Random (shuffle=True) or in-order batches of `batch_size`, sharded and resumable.

    `data` is the dataset (anything with len()) or its size. Use shuffle=False for evaluation.
    """

    def __init__(self, data: int | Sized, batch_size: int, *, shuffle: bool = True, seed: int = 0,
                 num_replicas: int = 1, rank: int = 0, drop_last: bool = False) -> None:
        if batch_size < 1:
            raise DataError(f"{type(self).__name__}: batch_size={batch_size}; use a positive int")
        self.batch_size = int(batch_size)
        super().__init__(_num_samples(data), shuffle=shuffle, seed=seed, num_replicas=num_replicas,
                         rank=rank, drop_last=drop_last)

    def _plan(self, epoch: int) -> list[list[int]]:
        order = _rng(self.seed, epoch).permutation(self.num_samples) if self.shuffle else np.arange(self.num_samples)
        order = order.tolist()
        return [order[i : i + self.batch_size] for i in range(0, len(order), self.batch_size)]

    def _is_incomplete(self, batch: list[int]) -> bool:
        return len(batch) < self.batch_size

    def _fingerprint(self) -> dict[str, Any]:
        return {**super()._fingerprint(), "batch_size": self.batch_size}


class LengthGroupedBatchSampler(_ShardedBatchSampler):
    """Batches of similar lengths, in shuffled order.

    Per epoch: shuffle the indices, cut them into mega-batches of `mega_batch_mult *
    batch_size`, sort each mega-batch by length (longest first), cut it into batches, then
    shuffle the batches. A larger mega_batch_mult means less padding and less randomness
    (transformers' `get_length_grouped_indices` uses 50). The `num_replicas` batches with the
    longest sequences go first, so an out-of-memory shows at step 0, not hours later.
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
        super().__init__(len(self.lengths), shuffle=shuffle, seed=seed, num_replicas=num_replicas,
                         rank=rank, drop_last=drop_last)

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
        # the longest batches first (one per rank), for an early out-of-memory
        first = sorted(range(len(batches)), key=lambda b: -lengths[batches[b][0]])[: self.num_replicas]
        chosen = set(first)
        batches = [batches[b] for b in first] + [b for k, b in enumerate(batches) if k not in chosen]
        if last is not None:
            batches.append(last)  # the short batch stays last, where drop_last finds it
        return batches

    def _is_incomplete(self, batch: list[int]) -> bool:
        return len(batch) < self.batch_size

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
        return _best_fit_decreasing(lens, max_length)
    rng = _rng(seed, epoch)
    bins = _best_fit_decreasing(lens, max_length, order=rng.permutation(len(lens)).tolist())
    return [bins[b] for b in rng.permutation(len(bins)).tolist()]


class PackedBatchSampler(_ShardedBatchSampler):
    """Batches of `rows_per_batch` packed bins, for `PackingCollator`.

    Each yielded batch is the concatenation of its bins' indices, bin after bin; a
    `PackingCollator` with the default strategy="next_fit" and the same max_length packs it
    into at most rows_per_batch rows (as many as the bins, or fewer). Bins are re-planned each
    epoch from (seed, epoch) when shuffle=True; drop_last drops a last batch of fewer bins.
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
        self._short_last = False  # whether the cached plan's last batch has fewer bins
        super().__init__(len(self.lengths), shuffle=shuffle, seed=seed, num_replicas=num_replicas,
                         rank=rank, drop_last=drop_last)

    def _plan(self, epoch: int) -> list[list[int]]:
        bins = plan_packing(self.lengths, self.max_length, seed=self.seed if self.shuffle else None,
                            epoch=epoch, truncate=self.truncate)
        r = self.rows_per_batch
        groups = [bins[i : i + r] for i in range(0, len(bins), r)]
        self._short_last = len(groups[-1]) < r
        return [[i for b in g for i in b] for g in groups]

    def _is_incomplete(self, batch: list[int]) -> bool:
        return self._short_last

    def _fingerprint(self) -> dict[str, Any]:
        return {**super()._fingerprint(), "max_length": self.max_length, "rows_per_batch": self.rows_per_batch}
