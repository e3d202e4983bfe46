"""DeepSpeed ZeRO-2/3 (`train.distributed.strategy: deepspeed`) on the engine that
nlp.train.zero builds from the trainer's own AdamW and schedule.

The engine is the model the loop calls: it reduces every micro-batch's gradients into its
partitions (no no_sync), clips, steps and schedules in `engine.step()`, drops a step whose
gradient norm is not finite, and writes / loads its own partitions (`deepspeed/` in a
checkpoint, loadable on as many processes only). A run that fails ends the engine, and with
it the one-process group a one-process run made.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import torch

from nlp.train import zero
from nlp.train.strategies.base import MakeOptimizer, Strategy

__all__ = ["ZeroRedundancy"]

logger = logging.getLogger(__name__)


class ZeroRedundancy(Strategy):
    name = "deepspeed"
    checkpoint_marker = zero.ZERO_DIR

    @classmethod
    def wrote(cls, checkpoint: Path) -> bool:
        return zero.is_zero_checkpoint(checkpoint)

    def check(self) -> None:
        super().check()
        zero.check_zero(precision=self.accelerator.mixed_precision)

    def prepare(self, model: torch.nn.Module, make_optimizer: MakeOptimizer) -> tuple[Any, Any, Any]:
        s, acc = self.settings, self.accelerator
        model = model.to(acc.device)
        self.optimizer, self.scheduler = make_optimizer(model)
        self.model = zero.initialize(
            model, self.optimizer, self.scheduler, stage=s.distributed.stage, precision=acc.mixed_precision,
            max_grad_norm=s.optim.max_grad_norm,
            micro_batch_per_process=max(1, s.data.batch_size // acc.num_processes),
        )
        return self.model, self.optimizer, self.scheduler

    def _engine(self) -> bool:
        return zero.is_engine(self.model)

    def backward(self, loss: torch.Tensor) -> None:
        zero.backward(self.model, loss)

    def step(self, max_norm: float | None) -> tuple[bool, float | None]:
        applied, grad_norm = zero.step(self.model)  # the engine clips, steps and schedules
        return applied, grad_norm if max_norm is not None else None

    def drop_gradients(self) -> None:
        # DeepSpeed's step finds the non-finite gradient norm, drops the gradients and skips the
        # update and the schedule (nlp.train.zero: the norm is always computed)
        applied, norm = zero.step(self.model)
        if applied:
            logger.warning("DeepSpeed applied a step whose loss was not finite (gradient norm %s)", norm)

    def forward_is_collective(self) -> bool:
        return True  # ZeRO-3's forward gathers; ZeRO-2 has a collective in one code path too

    def save(self, directory: Path) -> None:
        zero.save(directory, self.model)

    def load(self, checkpoint: Path, *, saved_world_size: int) -> None:
        zero.check_world_size(checkpoint, saved_world_size, self.accelerator.num_processes)
        zero.load(checkpoint, self.model)

    def load_model(self, checkpoint: Path) -> None:
        zero.load_model(checkpoint, self.model)

    def final_model(self) -> torch.nn.Module:
        return self.model.module if self._engine() else self.accelerator.unwrap_model(self.model)

    def full_state(self) -> dict[str, torch.Tensor] | None:
        if not self._engine():  # ended: the module holds what it holds
            return None
        return zero.full_model_state(self.model, is_main=self.accelerator.is_main_process)

    def nonfinite_parameters(self) -> list[str]:
        if self._engine():
            return zero.nonfinite_parameters(self.model)
        return super().nonfinite_parameters()

    def abort(self) -> None:
        if self._engine():
            zero.end(self.model)

    def release(self) -> None:
        if self._engine():  # its hooks, buffers and partitions, before the group goes
            zero.end(self.model)
