"""Sharded data-parallel training on torch's FSDP2 (`train.distributed.strategy: fsdp`).

Why FSDP2 directly and not accelerate's FSDP plugin: accelerate 1.15 switches FSDP on for GPU-like
process types only and silently runs plain DDP on CPU (its `state.py`), so a CPU run asked to
shard would quietly not shard, and nothing of it could be tested on CPU. torchtune builds on
`torch.distributed.fsdp.fully_shard` and `torch.distributed.checkpoint` directly; so does this
module. accelerate still launches the processes and does everything else (devices, process
group, reductions, logging).

What is sharded: each encoder layer (each child of an `nn.ModuleList` in the model: the layers of
a transformer stack) is one FSDP unit, and the root (embeddings, pooler, task head) another.
A unit's parameters live as `DTensor` shards, 1/N of each tensor per process; the unit gathers
them when it runs and frees them again after its forward (`reshard_after_forward`) and backward.
Gradients are reduce-scattered after every micro-batch, so every process holds 1/N of the
gradients and of AdamW's state (the optimizer is built on the shards).

Mixed precision follows `train.mixed_precision`: bf16 gathers the parameters in bf16 (half the
traffic and unsharded memory) and reduces the gradients in fp32 (`MixedPrecisionPolicy`); fp16
needs a sharded loss scaler, not wired in, and is refused. CPU offload (`CPUOffloadPolicy`) keeps
the shards and the optimizer step in CPU memory: GPUs only.

With one process there is nothing to shard: the model trains as it is, and checkpoints are still
written in the sharded format (nlp.train.dcp_checkpoint), so that a run moves between 1 and N
processes in either direction.
"""

from __future__ import annotations

from typing import Any, Iterable

import torch
from torch import nn

from nlp._common import ConfigError

__all__ = ["fsdp_available", "check_strategy", "shard_model", "sharding_units", "is_sharded",
           "local_tensor", "clip_grad_norm", "full_model_state", "memory_per_process"]

def fsdp_available() -> bool:
    """True when this torch has FSDP2 (`torch.distributed.fsdp.fully_shard`, torch >= 2.6)."""
    try:
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard  # noqa: F401
    except ImportError:
        return False
    return torch.distributed.is_available()


def check_strategy(strategy: str, *, precision: str, cpu_offload: bool, device: torch.device) -> None:
    """Refuse what cannot work, naming the setting and the fix (before the model is touched)."""
    if strategy != "fsdp":
        if cpu_offload:
            raise ConfigError("train.distributed.cpu_offload=true applies to strategy=fsdp only; "
                              "set train.distributed.strategy=fsdp or cpu_offload=false")
        return
    if not fsdp_available():
        raise ConfigError(
            f"train.distributed.strategy=fsdp needs torch.distributed.fsdp.fully_shard (FSDP2, torch "
            f">= 2.6); this torch ({torch.__version__}) has none. Upgrade torch, or use strategy=ddp"
        )
    if precision == "fp16":
        raise ConfigError(
            "train.distributed.strategy=fsdp with mixed_precision=fp16: fp16 needs a sharded loss "
            "scaler, which is not wired in. Use mixed_precision=bf16 (Ampere+ GPUs, CPUs with "
            "AVX512-BF16/AMX) or no, or strategy=ddp"
        )
    if cpu_offload and device.type != "cuda":
        raise ConfigError(
            "train.distributed.cpu_offload=true moves sharded parameters and the optimizer step from "
            "GPU to CPU memory; this run is on the CPU, where they are already. Set "
            "train.distributed.cpu_offload=false"
        )


def sharding_units(model: nn.Module) -> list[nn.Module]:
    """The modules that become FSDP units below the root: every child of an `nn.ModuleList`
    (the encoder's layers). A model without one is sharded as one unit, the root."""
    return [child for m in model.modules() if isinstance(m, nn.ModuleList) for child in m]


def shard_model(model: nn.Module, *, precision: str, reshard_after_forward: bool = True,
                cpu_offload: bool = False) -> tuple[nn.Module, Any]:
    """Apply `fully_shard` to each unit, then to the root, in place, over all processes.
    Returns (the model, its device mesh). Build the optimizer afterwards: the parameters are
    replaced by their DTensor shards."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import CPUOffloadPolicy, MixedPrecisionPolicy, OffloadPolicy, fully_shard

    device = next(model.parameters()).device
    mesh = init_device_mesh(device.type, (torch.distributed.get_world_size(),))
    mp = (MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
          if precision == "bf16" else MixedPrecisionPolicy())
    offload = CPUOffloadPolicy() if cpu_offload else OffloadPolicy()
    for unit in sharding_units(model):
        fully_shard(unit, mesh=mesh, reshard_after_forward=reshard_after_forward, mp_policy=mp,
                    offload_policy=offload)
    # The root's parameters are needed again at once by the backward: keep them gathered.
    fully_shard(model, mesh=mesh, reshard_after_forward=False, mp_policy=mp, offload_policy=offload)
    return model, mesh


def is_sharded(model: nn.Module) -> bool:
    from torch.distributed.fsdp import FSDPModule

    return isinstance(model, FSDPModule)


def local_tensor(t: torch.Tensor) -> torch.Tensor:
    """This process's shard of a DTensor; a plain tensor as it is."""
    from torch.distributed.tensor import DTensor

    return t.to_local() if isinstance(t, DTensor) else t


def clip_grad_norm(parameters: Iterable[nn.Parameter], max_norm: float) -> float:
    """Clip sharded gradients by their global norm (over every process's shards) and return
    that norm: `clip_grad_norm_` reduces DTensor norms across the mesh; the result is one."""
    from torch.distributed.tensor import DTensor

    norm = torch.nn.utils.clip_grad_norm_(list(parameters), max_norm)
    if isinstance(norm, DTensor):
        norm = norm.full_tensor()
    return float(norm)


def full_model_state(model: nn.Module) -> dict[str, torch.Tensor]:
    """The whole model's state dict, gathered into CPU memory on rank 0 (the other processes get
    an empty dict); every process must call it. A model that is not sharded gives its own."""
    if not is_sharded(model):
        return {k: v.detach().cpu() for k, v in model.state_dict().items()}
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    return get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))


def memory_per_process(model: nn.Module, optimizer: torch.optim.Optimizer | None = None) -> dict[str, int]:
    """Bytes this process holds of parameters, gradients and optimizer state: the local shards'
    sizes for a sharded model (a count, not a measurement)."""
    def size(t: torch.Tensor) -> int:
        local = local_tensor(t)
        return local.numel() * local.element_size()

    params = list(model.parameters())
    out = {"parameters": sum(size(p) for p in params),
           "gradients": sum(size(p.grad) for p in params if p.grad is not None), "optimizer": 0}
    if optimizer is not None:
        out["optimizer"] = sum(size(v) for state in optimizer.state.values() for v in state.values()
                               if torch.is_tensor(v))
    return out
