"""Batch samplers for the engine, and the skip-ahead that makes resume exact.

A batch sampler here yields lists of dataset indices for THIS process and is deterministic given
(seed, epoch): the trainer calls `set_epoch(e)` before each epoch. That is what makes resume
exact and cheap: to continue at batch k of epoch e, regenerate epoch e's order and drop the
first k index lists (`skip_batches`) — no example is loaded or collated twice, and no RNG state
of the sampler needs saving.
"""

from __future__ import annotations

import itertools
from typing import Iterator, Protocol, Sequence

import torch

__all__ = ["EpochBatchSampler", "RandomBatchSampler", "SequentialShardSampler", "skip_batches"]


class EpochBatchSampler(Protocol):
    def set_epoch(self, epoch: int) -> None: ...
    def __iter__(self) -> Iterator[list[int]]: ...
    def __len__(self) -> int: ...


class RandomBatchSampler:
    """Shuffled batches of a global size, each process taking its slice of every batch.

    Global batch b of epoch e is the same whatever the number of processes; rank r takes
    positions [r*B/W, (r+1)*B/W) of it. So 1 process with batch_size B and W processes with
    B/W each see the same examples per step (what makes data-parallel equal to one process).
    """

    def __init__(
        self,
        num_examples: int,
        batch_size: int,
        *,
        shuffle: bool = True,
        seed: int = 0,
        num_replicas: int = 1,
        rank: int = 0,
        drop_last: bool = False,
    ) -> None:
        if batch_size % num_replicas:
            raise ValueError(f"batch_size {batch_size} is not divisible by {num_replicas} processes")
        self.n, self.batch_size, self.shuffle, self.seed = num_examples, batch_size, shuffle, seed
        self.num_replicas, self.rank, self.drop_last = num_replicas, rank, drop_last
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        full, rest = divmod(self.n, self.batch_size)
        return full + (1 if rest and not self.drop_last else 0)

    def __iter__(self) -> Iterator[list[int]]:
        if self.shuffle:
            g = torch.Generator().manual_seed(self.seed * 1_000_003 + self.epoch)
            order = torch.randperm(self.n, generator=g).tolist()
        else:
            order = list(range(self.n))
        per_rank = self.batch_size // self.num_replicas
        for b in range(len(self)):
            batch = order[b * self.batch_size : (b + 1) * self.batch_size]
            if len(batch) < self.batch_size:
                # Last short batch: split it as evenly as possible; a rank may get an example
                # again (wrap-around) so that no process is left without data (DDP would hang).
                size = -(-len(batch) // self.num_replicas)
                mine = batch[self.rank * size : (self.rank + 1) * size]
                yield mine if mine else batch[: 1]
            else:
                yield batch[self.rank * per_rank : (self.rank + 1) * per_rank]


class SequentialShardSampler:
    """Evaluation order: examples strided over processes (rank r gets examples r, r+W, r+2W, ...),
    in batches of consecutive indices; with `lengths`, each rank's share is sorted longest first
    so that a batch holds examples of similar length (little padding: about half the compute of
    dataset order on review-like data). The trainer puts predictions back in dataset order."""

    def __init__(self, num_examples: int, batch_size: int, *, num_replicas: int = 1, rank: int = 0,
                 lengths: Sequence[int] | None = None):
        self.indices = list(range(rank, num_examples, num_replicas))
        if lengths is not None:
            if len(lengths) != num_examples:
                raise ValueError(f"got {len(lengths)} lengths for {num_examples} examples")
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
    """Wrap a batch sampler so that its next iteration drops the first `n` batches.

    Used once, for the epoch a run resumes in; later epochs iterate the wrapped sampler whole.
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
