"""Pick the device and the mixed-precision mode, and refuse combinations that cannot work.

Why "auto" is not simply bf16: on a CPU without AMX tiles, bf16 matmuls are emulated and run at
about half the speed of fp32, so the fast choice there is full precision. On CUDA, bf16 needs
Ampere (compute capability 8.0) or newer; older GPUs get fp16 with loss scaling.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

import torch

from nlp._common import ConfigError

__all__ = ["cpu_has_amx", "resolve_mixed_precision", "check_distributed_backend"]


@functools.cache
def cpu_has_amx() -> bool:
    """True when the CPU has AMX bf16 tiles (Sapphire Rapids and later)."""
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:  # not Linux: ask torch (private API, hence the guard)
        try:
            return bool(torch._C._cpu._is_amx_tile_supported())  # type: ignore[attr-defined]
        except (AttributeError, RuntimeError):
            return False
    return "amx_bf16" in flags.split()


def resolve_mixed_precision(requested: str, *, use_cuda: bool) -> str:
    """Turn the `mixed_precision` setting into what accelerate accepts: no | fp16 | bf16."""
    if requested == "auto":
        if use_cuda:
            major, _ = torch.cuda.get_device_capability()
            return "bf16" if major >= 8 else "fp16"
        return "bf16" if cpu_has_amx() else "no"
    if requested == "fp16" and not use_cuda:
        raise ConfigError(
            "mixed_precision='fp16' needs a CUDA GPU (fp16 loss scaling is a CUDA feature), "
            "but this run is on the CPU. Use mixed_precision=no, or bf16 (fast only on CPUs "
            "with AMX), or auto."
        )
    if requested == "bf16" and use_cuda and not torch.cuda.is_bf16_supported():
        raise ConfigError(
            "mixed_precision='bf16' is not supported by this GPU (needs Ampere or newer). "
            "Use mixed_precision=fp16 or auto."
        )
    return requested


def check_distributed_backend(use_cuda: bool) -> None:
    """FSDP and DeepSpeed (chosen through `accelerate config`) shard over GPUs only; say so
    plainly instead of letting them fail deep inside their set-up."""
    for var, name in (("ACCELERATE_USE_FSDP", "FSDP"), ("ACCELERATE_USE_DEEPSPEED", "DeepSpeed")):
        if os.environ.get(var, "").lower() in {"1", "true", "yes"} and not use_cuda:
            raise ConfigError(
                f"{name} was selected through accelerate's config ({var}=true), but no CUDA GPU "
                f"is in use. {name} is for multi-GPU runs; on CPU use plain data-parallel: "
                "`accelerate launch --multi_gpu --num_processes N --num_machines 1 "
                "--mixed_precision no --dynamo_backend no ...` (see docs/training.md)."
            )
