"""Plain data-parallel training on accelerate (`train.distributed.strategy: ddp`, the default).

Every process holds the whole model and optimizer; accelerate wraps the model in DDP (nothing
with one process), the gradients are averaged over the processes on the last micro-batch of a
step, and the main process alone writes a checkpoint's `model.safetensors` and `optimizer.pt`
(with the fp16 loss scaler's state, when there is one).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ContextManager

import safetensors.torch
import torch

from nlp._common import ConfigError
from nlp.train.strategies.base import MakeOptimizer, Strategy

__all__ = ["DataParallel"]


class DataParallel(Strategy):
    name = "ddp"
    checkpoint_marker = "model.safetensors"

    def prepare(self, model: torch.nn.Module, make_optimizer: MakeOptimizer) -> tuple[Any, Any, Any]:
        optimizer, self.scheduler = make_optimizer(model)
        self.model, self.optimizer = self.accelerator.prepare(model, optimizer)
        return self.model, self.optimizer, self.scheduler

    def no_sync(self) -> ContextManager:
        return self.accelerator.no_sync(self.model)

    def backward(self, loss: torch.Tensor) -> None:
        self.accelerator.backward(loss)

    def clip(self, max_norm: float) -> float:
        """Clip the gradients by their global norm; return that norm."""
        return float(self.accelerator.clip_grad_norm_(self.model.parameters(), max_norm))

    def step(self, max_norm: float | None) -> tuple[bool, float | None]:
        acc = self.accelerator
        grad_norm = self.clip(max_norm) if max_norm is not None else None
        scaler = acc.scaler  # fp16 only
        scale = scaler.get_scale() if scaler is not None else None
        self.optimizer.step()
        # the fp16 loss scaler found inf gradients: no update, and it lowers its scale. accelerate's
        # flag misses the skips a fused optimizer makes itself (AdamW's fused CUDA kernel): the scale tells
        skipped = acc.optimizer_step_was_skipped or (scaler is not None and scaler.get_scale() < scale)
        if not skipped:
            self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        return not skipped, grad_norm

    def bare_optimizer(self) -> torch.optim.Optimizer:
        """The torch optimizer under accelerate's wrapper (what a checkpoint saves and loads)."""
        return getattr(self.optimizer, "optimizer", self.optimizer)

    # ------------------------------------------------------------------ checkpoints

    def save(self, directory: Path) -> None:
        if not self.accelerator.is_main_process:  # every process holds the same state
            return
        # save_model (not save_file) de-duplicates tied weights, e.g. MLM decoder/embeddings.
        safetensors.torch.save_model(self.final_model(), str(directory / "model.safetensors"))
        opt = {"optimizer": self.bare_optimizer().state_dict()}
        if self.accelerator.scaler is not None:
            opt["scaler"] = self.accelerator.scaler.state_dict()
        torch.save(opt, directory / "optimizer.pt")

    def load(self, checkpoint: Path, *, saved_world_size: int) -> None:
        missing, unexpected = safetensors.torch.load_model(self.final_model(), str(checkpoint / "model.safetensors"),
                                                           strict=False)
        if missing or unexpected:
            raise ConfigError(
                f"checkpoint {checkpoint} does not fit this model: missing {sorted(missing)[:5]}, "
                f"unexpected {sorted(unexpected)[:5]}. Was it written by a different model?"
            )
        opt = torch.load(checkpoint / "optimizer.pt", map_location="cpu", weights_only=True)
        self.bare_optimizer().load_state_dict(opt["optimizer"])
        if self.accelerator.scaler is not None and "scaler" in opt:
            self.accelerator.scaler.load_state_dict(opt["scaler"])

    def load_model(self, checkpoint: Path) -> None:
        safetensors.torch.load_model(self.final_model(), str(checkpoint / "model.safetensors"))
