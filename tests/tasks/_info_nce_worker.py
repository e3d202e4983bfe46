"""The per-process half of test_embedding's cross-process InfoNCE test (spawned by name)."""

from __future__ import annotations

import torch

from nlp.tasks.embedding.heads import info_nce


def info_nce_worker(rank: int, world: int, port: int, q, p, out_dir: str) -> None:
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    try:
        sizes = [3, 2]  # unequal: the last batch of an epoch
        start = sum(sizes[:rank])
        ql = q[start:start + sizes[rank]].clone().requires_grad_(True)
        pl = p[start:start + sizes[rank]].clone().requires_grad_(True)
        loss = info_nce(ql, pl, None, 0.1)
        # the Trainer weights each process's mean loss by its examples (loss_units): sum, then
        # divide by the global count, as one process over the whole batch would
        (loss * sizes[rank] / sum(sizes)).backward()
        torch.save({"loss": loss.detach(), "gq": ql.grad, "gp": pl.grad}, f"{out_dir}/rank{rank}.pt")
    finally:
        dist.barrier()
        dist.destroy_process_group()


def hybrid_info_nce_worker(rank: int, world: int, port: int, q, p, qs, ps, out_dir: str) -> None:
    """The same for the hybrid loss of a model with lexical weights (dense and sparse vectors)."""
    import torch.distributed as dist

    from nlp.tasks.embedding.heads import hybrid_info_nce

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    try:
        sizes = [3, 2]
        start = sum(sizes[:rank])
        local = [t[start:start + sizes[rank]].clone().requires_grad_(True) for t in (q, p, qs, ps)]
        qs_keys, ps_keys = (torch.arange(t.shape[1]).expand(t.shape[0], -1) for t in local[2:])
        ps_weights = local[3]
        if rank == 0:  # rows one key longer here (key 0 at weight 0, which adds nothing): padded when gathered
            ps_keys = torch.cat([ps_keys, torch.zeros(len(ps_keys), 1, dtype=torch.long)], 1)
            ps_weights = torch.cat([ps_weights, torch.zeros(len(ps_keys), 1)], 1)
        loss = hybrid_info_nce(local[0], local[1], None, (qs_keys, local[2]), (ps_keys, ps_weights), None, 0.1)
        (loss * sizes[rank] / sum(sizes)).backward()
        torch.save({"loss": loss.detach(), "grads": [t.grad for t in local]}, f"{out_dir}/rank{rank}.pt")
    finally:
        dist.barrier()
        dist.destroy_process_group()
