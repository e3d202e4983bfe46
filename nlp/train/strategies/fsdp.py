"""Sharded data-parallel training (`train.distributed.strategy: fsdp`): torch FSDP2 shards
(nlp.train.sharding) and DCP checkpoints (nlp.train.dcp_checkpoint).

On several processes the model is sharded before the optimizer is built (AdamW then holds 1/N
of its state, as DTensors), accelerate prepares only the optimizer (it would wrap the sharded
model in DDP), gradients are clipped by their global norm over every shard, and every process
writes its shards of a checkpoint. With one process the model trains whole, and its checkpoints
are still DCP's, so that a run moves between 1 and N processes in either direction.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from nlp.train import dcp_checkpoint, sharding
from nlp.train.strategies.ddp import DataParallel
from nlp.train.strategies.base import MakeOptimizer

__all__ = ["FullyShardedDataParallel"]


class FullyShardedDataParallel(DataParallel):
    name = "fsdp"
    checkpoint_marker = f"{dcp_checkpoint.SHARDED_DIR}/.metadata"

    def check(self) -> None:
        acc, d = self.accelerator, self.settings.distributed
        sharding.check_strategy(self.name, precision=acc.mixed_precision, cpu_offload=d.cpu_offload,
                                device=acc.device)

    def prepare(self, model: torch.nn.Module, make_optimizer: MakeOptimizer) -> tuple[Any, Any, Any]:
        acc, d = self.accelerator, self.settings.distributed
        if acc.num_processes == 1:  # nothing to shard
            return super().prepare(model, make_optimizer)
        self.model, self._mesh = sharding.shard_model(
            model.to(acc.device), precision=acc.mixed_precision,
            reshard_after_forward=d.reshard_after_forward, cpu_offload=d.cpu_offload)
        optimizer, self.scheduler = make_optimizer(self.model)
        self.optimizer = acc.prepare(optimizer)
        return self.model, self.optimizer, self.scheduler

    def _sharded(self) -> bool:
        return sharding.is_sharded(self.model)

    def clip(self, max_norm: float) -> float:
        if self._sharded():
            return sharding.clip_grad_norm(self.model.parameters(), max_norm)
        return super().clip(max_norm)

    def forward_is_collective(self) -> bool:
        return self._sharded()

    def save(self, directory: Path) -> None:
        dcp_checkpoint.save_sharded(directory / dcp_checkpoint.SHARDED_DIR, self.final_model(), self.bare_optimizer())

    def load(self, checkpoint: Path, *, saved_world_size: int) -> None:
        dcp_checkpoint.load_sharded(checkpoint / dcp_checkpoint.SHARDED_DIR, self.final_model(), self.bare_optimizer())

    def load_model(self, checkpoint: Path) -> None:
        dcp_checkpoint.load_sharded_model(checkpoint / dcp_checkpoint.SHARDED_DIR, self.final_model())

    def full_state(self) -> dict[str, torch.Tensor] | None:
        model = self.final_model()
        return sharding.full_model_state(model) if sharding.is_sharded(model) else None

    def nonfinite_parameters(self) -> list[str]:
        return [name for name, p in self.final_model().named_parameters()
                if not bool(torch.isfinite(sharding.local_tensor(p)).all())]

    def release(self) -> None:
        if self._sharded():  # AdamW's state: DTensor shards on the group's mesh
            self.bare_optimizer().state.clear()
        self._mesh = None
