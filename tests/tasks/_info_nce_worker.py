"""The per-process halves of the cross-process InfoNCE tests (spawned by name).

Each process computes its share in a function of its own, so that when the function returns
nothing holds the autograd graph, whose collective nodes hold the process group; the group is
then ended the way the Trainer ends it (Trainer._end_process_group): collect, meet, destroy. A
gloo group that outlives destroy_process_group is freed during interpreter shutdown with its
threads running, which aborts the process; spawn reports that as a failure, and so does the test.
"""

from __future__ import annotations

import gc
from typing import Any, Callable

import torch

from nlp.tasks.embedding.heads import hybrid_info_nce, info_nce

SIZES = [3, 2]  # unequal shares: the last batch of an epoch


def _in_group(rank: int, world: int, port: int, share: Callable[[], dict[str, Any]], out: str) -> None:
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    try:
        torch.save(share(), out)
    finally:
        gc.collect()
        dist.barrier()
        dist.destroy_process_group()


def info_nce_worker(rank: int, world: int, port: int, q, p, out_dir: str) -> None:
    def share() -> dict[str, Any]:
        start = sum(SIZES[:rank])
        ql = q[start:start + SIZES[rank]].clone().requires_grad_(True)
        pl = p[start:start + SIZES[rank]].clone().requires_grad_(True)
        loss = info_nce(ql, pl, None, 0.1)
        # the Trainer weights each process's mean loss by its examples (loss_units): sum, then
        # divide by the global count, as one process over the whole batch would
        (loss * SIZES[rank] / sum(SIZES)).backward()
        return {"loss": loss.detach(), "gq": ql.grad, "gp": pl.grad}

    _in_group(rank, world, port, share, f"{out_dir}/rank{rank}.pt")


def hybrid_info_nce_worker(rank: int, world: int, port: int, q, p, qs, ps, out_dir: str) -> None:
    """The same for the hybrid loss of a model with lexical weights (dense and sparse vectors)."""

    def share() -> dict[str, Any]:
        start = sum(SIZES[:rank])
        local = [t[start:start + SIZES[rank]].clone().requires_grad_(True) for t in (q, p, qs, ps)]
        qs_keys, ps_keys = (torch.arange(t.shape[1]).expand(t.shape[0], -1) for t in local[2:])
        ps_weights = local[3]
        if rank == 0:  # rows one key longer here (key 0 at weight 0, which adds nothing): padded when gathered
            ps_keys = torch.cat([ps_keys, torch.zeros(len(ps_keys), 1, dtype=torch.long)], 1)
            ps_weights = torch.cat([ps_weights, torch.zeros(len(ps_keys), 1)], 1)
        loss = hybrid_info_nce(local[0], local[1], None, (qs_keys, local[2]), (ps_keys, ps_weights), None, 0.1)
        (loss * SIZES[rank] / sum(SIZES)).backward()
        return {"loss": loss.detach(), "grads": [t.grad for t in local]}

    _in_group(rank, world, port, share, f"{out_dir}/rank{rank}.pt")
