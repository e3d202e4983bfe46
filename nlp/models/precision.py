"""The precision a PyTorch model runs inference in: "fp32", "bf16", "fp16", or "auto".

    precision = resolve_precision("auto", torch.device("cpu"))   # "bf16" on a CPU with AVX512-BF16
    model.to(dtype=PRECISION_DTYPES[precision])

"auto" is what is fast on the device: bf16 on CPUs with native bf16 dot products (AVX512-BF16 or
AMX, nlp.models.hardware) and on Ampere or newer GPUs, fp16 on older GPUs, fp32 elsewhere.

Inference in bf16 or fp16 runs on the model's weights cast to that dtype (what `nlp.pipeline(...,
precision=...)`, `nlp predict` and `nlp serve` do), not under autocast. Autocast keeps the fp32
weights and casts at every op: each linear's weight and input to bf16, its output back to fp32
where LayerNorm, softmax and the residual adds meet it. Those casts, and the extra passes over
fp32 activations, are a sizeable share of an inference forward that cast weights avoid, and
bf16 weights let oneDNN fuse GELU and the residual add into the GEMMs
(nlp.models._linear). LayerNorm and softmax still accumulate in fp32 inside their bf16 kernels.
On the held-out People's Daily test split the shipped lexical model scored word F1 0.96554 in
fp32, 0.96553 under autocast and 0.96557 on bf16 weights.
"""

from __future__ import annotations

import torch

from nlp._common import PRECISIONS, ConfigError, did_you_mean

from .hardware import cpu_has_fast_bf16

__all__ = ["PRECISIONS", "PRECISION_DTYPES", "precision_of", "resolve_precision"]

PRECISION_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def resolve_precision(requested: str, device: torch.device | str) -> str:
    """"auto" -> what is fast on `device` (see the module docstring); the others are checked
    (ConfigError naming the valid ones; fp16 only on a GPU) and returned."""
    device = torch.device(device)
    if requested not in PRECISIONS:
        raise ConfigError(f"precision {requested!r} is not one of {', '.join(PRECISIONS)}"
                          f"{did_you_mean(str(requested), PRECISIONS)}")
    if requested == "auto":
        if device.type == "cuda":
            major, _ = torch.cuda.get_device_capability(device)
            return "bf16" if major >= 8 else "fp16"
        return "bf16" if device.type == "cpu" and cpu_has_fast_bf16() else "fp32"
    if requested == "fp16" and device.type != "cuda":
        raise ConfigError("precision 'fp16' needs a CUDA device; on the CPU use bf16 (fast on CPUs with "
                          "AVX512-BF16 or AMX), fp32, or auto")
    return requested


def precision_of(dtype: torch.dtype) -> str:
    """The precision name of a floating dtype ("fp32", "bf16", "fp16"), else the dtype's name."""
    for name, candidate in PRECISION_DTYPES.items():
        if dtype == candidate:
            return name
    return str(dtype).replace("torch.", "")
