"""AdamW with decoupled weight decay on weights only, and warmup + decay schedules."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from nlp.train.settings import OptimSettings, ScheduleSettings

__all__ = ["param_groups", "build_optimizer", "build_scheduler", "LrLambda"]

# Normalisation layers rescale activations; decaying their gains towards 0 only hurts.
_NORM_TYPES: tuple[type[nn.Module], ...] = (
    nn.LayerNorm,
    nn.GroupNorm,
    nn.BatchNorm1d,
    nn.BatchNorm2d,
    *((nn.RMSNorm,) if hasattr(nn, "RMSNorm") else ()),
)


def param_groups(model: nn.Module, weight_decay: float) -> list[dict]:
    """Split trainable parameters: matrices (linear, embedding) get weight decay; biases and
    normalisation weights (any 1-D parameter, or any parameter of a norm layer) do not."""
    no_decay: set[int] = set()
    for module in model.modules():
        if isinstance(module, _NORM_TYPES):
            no_decay.update(id(p) for p in module.parameters(recurse=False))
    decay, plain = [], []
    for _, p in model.named_parameters():
        if not p.requires_grad:
            continue
        (plain if p.ndim < 2 or id(p) in no_decay else decay).append(p)
    return [
        {"params": decay, "weight_decay": weight_decay},
        {"params": plain, "weight_decay": 0.0},
    ]


def build_optimizer(model: nn.Module, s: OptimSettings) -> torch.optim.AdamW:
    groups = param_groups(model, s.weight_decay)
    impl = s.impl if s.impl != "auto" else _auto_impl(groups)
    flags = {"fused": {"fused": True}, "foreach": {"foreach": True}, "for_loop": {"foreach": False}}
    return torch.optim.AdamW(groups, lr=s.lr, betas=s.betas, eps=s.eps, **flags[impl])


# Devices with a fused AdamW kernel in torch (CPU since torch 2.4): one kernel per parameter
# instead of a dozen batched passes over all optimizer state; 3-5x faster steps on CPU.
_FUSED_DEVICES = ("cuda", "cpu", "xpu", "mps")


def _auto_impl(groups: list[dict]) -> str:
    """fused where every parameter is a floating tensor on a device with the fused kernel,
    foreach otherwise."""
    params = [p for g in groups for p in g["params"]]
    if params and all(p.device.type in _FUSED_DEVICES and p.is_floating_point() for p in params):
        return "fused"
    return "foreach"


@dataclass
class LrLambda:
    """Multiplier of the peak lr at optimizer step `step`: linear warmup, then linear or
    cosine decay to `min_ratio`. A dataclass (not a closure) so the scheduler's state_dict
    records it and a resumed run can check it."""

    name: str
    warmup: int
    total: int
    min_ratio: float = 0.0

    def __call__(self, step: int) -> float:
        if step < self.warmup:
            return (step + 1) / (self.warmup + 1)  # never exactly 0: the first step learns
        if self.name == "constant":
            return 1.0
        progress = min(1.0, (step - self.warmup) / max(1, self.total - self.warmup))
        if self.name == "linear":
            shape = 1.0 - progress
        else:  # cosine
            shape = 0.5 * (1.0 + math.cos(math.pi * progress))
        return self.min_ratio + (1.0 - self.min_ratio) * shape


def build_scheduler(
    optimizer: torch.optim.Optimizer, s: ScheduleSettings, total_steps: int
) -> torch.optim.lr_scheduler.LambdaLR:
    warmup = s.warmup_steps if s.warmup_steps is not None else int(s.warmup_ratio * total_steps)
    fn = LrLambda(s.name, min(warmup, total_steps), total_steps, s.min_lr_ratio)
    return torch.optim.lr_scheduler.LambdaLR(optimizer, fn)
