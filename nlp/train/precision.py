"""Pick the device and the mixed-precision mode, and refuse combinations that cannot work.

Why "auto" is not simply bf16 on CPU: bf16 is fast only where the CPU has bf16 dot-product
instructions, AVX512-BF16 (AMD Zen 4 and later, Intel Cooper Lake) or AMX (Intel Sapphire Rapids
and later). Without them oneDNN emulates bf16 and its matmuls run slower than fp32; with them a
bf16 matmul moves half the bytes and uses the dot-product units, several times the fp32 rate
(docs/training.md has measured figures). On CUDA, bf16 needs Ampere (compute capability 8.0) or newer; older GPUs get fp16 with
loss scaling.
"""

from __future__ import annotations

import os

import torch

from nlp._common import ConfigError
from nlp.models.hardware import cpu_bf16_flags, cpu_has_fast_bf16  # re-exported: the trainer's public names
from nlp.models._linear import ONEDNN_CACHE_ENTRIES, limit_onednn_cache  # re-exported: the trainer's bf16 runs

__all__ = ["cpu_bf16_flags", "cpu_has_fast_bf16", "resolve_mixed_precision", "limit_onednn_cache",
           "ONEDNN_CACHE_ENTRIES", "check_distributed_backend"]


def resolve_mixed_precision(requested: str, *, use_cuda: bool) -> str:
    """Turn the `mixed_precision` setting into what accelerate accepts: no | fp16 | bf16."""
    if requested == "auto":
        if use_cuda:
            major, _ = torch.cuda.get_device_capability()
            return "bf16" if major >= 8 else "fp16"
        return "bf16" if cpu_has_fast_bf16() else "no"
    if requested == "fp16" and not use_cuda:
        raise ConfigError(
            "mixed_precision='fp16' needs a CUDA GPU (fp16 loss scaling is a CUDA feature), "
            "but this run is on the CPU. Use mixed_precision=no, or bf16 (fast only on CPUs "
            "with AVX512-BF16 or AMX), or auto."
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
                f"is in use, where accelerate would silently run plain data-parallel. To shard, "
                "set train.distributed.strategy=fsdp (torch FSDP2, CPU or GPU) or =deepspeed (ZeRO "
                "2/3, CPU or GPU) and launch with "
                "`accelerate launch --multi_gpu --num_processes N --num_machines 1 "
                "--mixed_precision no --dynamo_backend no ...` (see docs/training.md)."
            )
