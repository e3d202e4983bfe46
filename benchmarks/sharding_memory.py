"""Per-process bytes of parameters + gradients + AdamW state, DDP vs FSDP vs DeepSpeed ZeRO-2/3,
on 2 gloo processes.

    torchrun --standalone --nproc-per-node 2 benchmarks/sharding_memory.py ernie-3.0-base-zh ernie-3.0-xbase-zh

A count, not a timing: each process builds the preset's sequence-classification model (2
labels), wraps it as `nlp.train` does for `train.distributed.strategy` ddp (torch DDP: the whole
model on every process) or fsdp (`nlp.train.sharding.shard_model`: FSDP2 per encoder layer +
root), takes one AdamW step on a 2 x 8-token batch, and sums the sizes of the tensors it holds
locally (a DTensor's local shard) with `nlp.train.sharding.memory_per_process`, gradients
measured before they are freed. Activations and the gathered layer in flight (one or two layers'
worth at a time under FSDP) come on top and depend on the batch. fp32, fused AdamW as trained.
With DeepSpeed installed, also `strategy: deepspeed` with ZeRO-2 and ZeRO-3 (`nlp.train.zero`:
the engine as the trainer builds it), counted by `nlp.train.zero.memory_per_process` after the
step: DeepSpeed's fp32 master partition (a copy, also in fp32 training) is a row of its own, and
its gradient partition is counted at the master partition's size.
Valid on a busy machine: nothing here is timed.
"""

from __future__ import annotations

import json
import os
import sys

import torch
import torch.distributed as dist

from nlp.models import preset_config
from nlp.tasks.classification.heads import ErnieForSequenceClassification
from nlp.train.optim import build_optimizer, build_scheduler
from nlp.train.settings import OptimSettings, ScheduleSettings
from nlp.train.sharding import memory_per_process, shard_model

GIB = 1024**3


def measure(preset: str, strategy: str) -> dict[str, int]:
    torch.manual_seed(0)
    model = ErnieForSequenceClassification(preset_config(preset, num_labels=2)).train()
    if strategy.startswith("zero"):
        return measure_zero(model, stage=int(strategy[-1]))
    if strategy == "fsdp":
        model, _ = shard_model(model, precision="no")
        wrapped = model
    else:
        wrapped = torch.nn.parallel.DistributedDataParallel(model)
    optimizer = build_optimizer(model, OptimSettings())
    batch = {"input_ids": torch.randint(1, 1000, (1, 8)), "labels": torch.tensor([1])}  # 2 x 8 globally
    wrapped(**batch).loss.backward()
    optimizer.step()
    counts = memory_per_process(model, optimizer)  # gradients still held: the peak of a step
    del wrapped, model, optimizer
    return counts


def measure_zero(model: torch.nn.Module, stage: int) -> dict[str, int]:
    from nlp.train import zero

    optimizer = build_optimizer(model, OptimSettings())
    scheduler = build_scheduler(optimizer, ScheduleSettings(), 10)
    engine = zero.initialize(model, optimizer, scheduler, stage=stage, precision="no", max_grad_norm=1.0,
                             micro_batch_per_process=1)
    batch = {"input_ids": torch.randint(1, 1000, (1, 8)), "labels": torch.tensor([1])}
    zero.backward(engine, engine(**batch).loss)
    zero.step(engine)
    counts = zero.memory_per_process(engine)
    zero.end(engine)
    return counts


def strategies() -> list[str]:
    try:
        import deepspeed  # noqa: F401
    except ImportError:
        return ["ddp", "fsdp"]
    return ["ddp", "fsdp", "zero2", "zero3"]


def main() -> None:
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    for preset in sys.argv[1:] or ["ernie-3.0-base-zh", "ernie-3.0-xbase-zh"]:
        for strategy in strategies():
            counts = measure(preset, strategy)
            total = sum(counts.values())
            every = [None] * dist.get_world_size()
            dist.all_gather_object(every, total)
            if rank == 0:
                print(json.dumps({"preset": preset, "strategy": strategy, "processes": dist.get_world_size(),
                                  **{k: round(v / GIB, 3) for k, v in counts.items()},
                                  "total_gib": round(total / GIB, 3),
                                  "per_process_gib": [round(t / GIB, 3) for t in every]}), flush=True)
            dist.barrier()
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
