"""The precision a PyTorch model runs inference in: "fp32", "bf16", "fp16", "int8", or "auto".

    precision = resolve_precision("auto", torch.device("cpu"))   # "bf16" on a CPU with AVX512-BF16
    model.to(dtype=PRECISION_DTYPES[precision])
    name = prepare_for_inference(model, "cpu", None)             # what pipelines and servers do

"auto" is what is fast on the device: bf16 on CPUs with native bf16 dot products (AVX512-BF16 or
AMX, nlp.models.hardware) and on Ampere or newer GPUs, fp16 on older GPUs; elsewhere (a CPU
without them) the precision the model declares, else fp32.

"int8" (CPU only) keeps the fp32 weights and runs the encoder's linear layers in int8
(nlp.models.int8_linear). It moves answers by rounding, so no model gets it unasked unless the
model declares it: `"inference_precision": "int8"` in its config.json, written when it was shipped
(`nlp hub ship --inference-precision int8`) after its test figures in int8 were measured. With
`precision=None` a pipeline, `nlp evaluate`, `nlp predict` and `nlp serve` run a model in the
precision it declares (on a device that runs it; int8: the CPU), else in the dtype it loads in.

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

import logging

import torch

from nlp._common import PRECISIONS, ConfigError, did_you_mean

from .hardware import cpu_has_fast_bf16
from .int8_linear import int8_available, quantize_linears

__all__ = ["PRECISIONS", "PRECISION_DTYPES", "DECLARABLE_PRECISIONS", "DECLARED_PRECISION_KEY", "declared_precision",
           "drop_declared_precision", "precision_of", "prepare_for_inference", "resolve_precision"]

logger = logging.getLogger(__name__)

PRECISION_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
# the config.json key of the precision a model's answers were measured in (module docstring)
DECLARED_PRECISION_KEY = "inference_precision"
DECLARABLE_PRECISIONS = ("fp32", "int8")


def resolve_precision(requested: str, device: torch.device | str, declared: str | None = None) -> str:
    """"auto" -> what is fast on `device`, given the precision the model declares (`declared`,
    see the module docstring); the others are checked (ConfigError naming the valid ones; fp16
    only on a GPU, int8 only on the CPU) and returned."""
    device = torch.device(device)
    if requested not in PRECISIONS:
        raise ConfigError(f"precision {requested!r} is not one of {', '.join(PRECISIONS)}"
                          f"{did_you_mean(str(requested), PRECISIONS)}")
    if requested == "auto":
        if device.type == "cuda":
            major, _ = torch.cuda.get_device_capability(device)
            return "bf16" if major >= 8 else "fp16"
        if device.type == "cpu" and cpu_has_fast_bf16():
            return "bf16"
        return declared if declared is not None and _runs_on(declared, device) else "fp32"
    if requested == "fp16" and device.type != "cuda":
        raise ConfigError("precision 'fp16' needs a CUDA device; on the CPU use bf16 (fast on CPUs with "
                          "AVX512-BF16 or AMX), int8, fp32, or auto")
    if requested == "int8" and not _runs_on("int8", device):
        raise ConfigError(f"precision 'int8' runs on the CPU (fbgemm's int8 GEMMs) and this is {device}"
                          + ("" if device.type != "cpu" else " without them (an x86 torch build has them)")
                          + "; on a GPU use bf16, fp16 or auto")
    return requested


def _runs_on(precision: str, device: torch.device) -> bool:
    if precision == "int8":
        return device.type == "cpu" and int8_available()
    return True


def declared_precision(config: object) -> str | None:
    """The precision a model's config declares its answers were measured in (`inference_precision`:
    fp32 or int8), or None; ConfigError when the value is not one of those."""
    extra = getattr(config, "extra", None) or {}
    value = extra.get(DECLARED_PRECISION_KEY)
    if value is None or value in DECLARABLE_PRECISIONS:
        return value
    raise ConfigError(f"the model's config.json says {DECLARED_PRECISION_KEY}: {value!r}; valid: "
                      f"{', '.join(DECLARABLE_PRECISIONS)} (or leave the key out)")


def drop_declared_precision(model: torch.nn.Module, made: str) -> None:
    """Remove the precision `model`'s config declares: it was measured on the weights it was
    shipped with, and a model `made` from them ("fine-tuned", "merged", "pruned") has others.
    Logged; declare one again when shipping it."""
    extra = getattr(getattr(model, "config", None), "extra", None) or {}
    if extra.pop(DECLARED_PRECISION_KEY, None) is not None:
        logger.info("the %s model does not keep its source's declared inference precision, which was measured on "
                    "the source's weights (declare one when shipping it: nlp hub ship --inference-precision)", made)


def prepare_for_inference(model: torch.nn.Module, device: torch.device | str, precision: str | None) -> str:
    """Move `model` to `device` in the precision asked (None: the one its config declares where
    the device runs it, else the dtype it loads in; "auto" and the rest: `resolve_precision`),
    in place, and return that precision's name. int8 keeps fp32 weights and packs int8 copies
    of the encoder's linear layers (nlp.models.int8_linear)."""
    device = torch.device(device)
    declared = declared_precision(getattr(model, "config", None))
    if precision is None:
        chosen = declared if declared is not None and _runs_on(declared, device) else None
    else:
        chosen = resolve_precision(precision, device, declared)
    dtype = None if chosen is None else PRECISION_DTYPES.get(chosen, torch.float32)
    model.to(device=device, dtype=dtype)
    if chosen == "int8":
        quantize_linears(model)
        return "int8"
    return precision_of(next(model.parameters()).dtype)


def precision_of(dtype: torch.dtype) -> str:
    """The precision name of a floating dtype ("fp32", "bf16", "fp16"), else the dtype's name."""
    for name, candidate in PRECISION_DTYPES.items():
        if dtype == candidate:
            return name
    return str(dtype).replace("torch.", "")
