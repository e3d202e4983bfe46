"""Per-process bytes of parameters + gradients + AdamW state, DDP vs FSDP, on 2 gloo processes.

    torchrun --standalone --nproc-per-node 2 benchmarks/sharding_memory.py ernie-3.0-base-zh ernie-3.0-xbase-zh

A count, not a timing: each process builds the preset's sequence-classification model (2
labels), wraps it as `nlp.train` does for `train.distributed.strategy` ddp (torch DDP: the whole
model on every process) or fsdp (`nlp.train.sharding.shard_model`: FSDP2 per encoder layer +
root), takes one AdamW step on a 2 x 8-token batch, and sums the sizes of the tensors it holds
locally (a DTensor's local shard) with `nlp.train.sharding.memory_per_process`, gradients
measured before they are freed. Activations and the gathered layer in flight (one or two layers'
worth at a time under FSDP) come on top and depend on the batch. fp32, fused AdamW as trained.
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
from nlp.train.optim import build_optimizer
from nlp.train.settings import OptimSettings
from nlp.train.sharding import memory_per_process, shard_model

GIB = 1024**3


def measure(preset: str, strategy: str) -> dict[str, int]:
    torch.manual_seed(0)
    model = ErnieForSequenceClassification(preset_config(preset, num_labels=2)).train()
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


def main() -> None:
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    for preset in sys.argv[1:] or ["ernie-3.0-base-zh", "ernie-3.0-xbase-zh"]:
        for strategy in ("ddp", "fsdp"):
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
