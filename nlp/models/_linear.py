"""Linear layers through oneDNN on CPU: the same math as `F.linear`, faster GEMMs.

On CPU, `F.linear` runs MKL's sgemm. PyTorch also ships oneDNN, whose fp32 matmul (the op
`torch.ops.mkldnn._linear_pointwise`, which torch.compile's CPU backend uses) is faster for the
forward GEMMs of an ERNIE layer and for the input-gradient GEMMs (benchmarks/model.py measures
it). For the weight-gradient GEMM (a long reduction over tokens) MKL is as fast or faster, so the
backward keeps `mm` there. oneDNN also fuses an epilogue into the GEMM: exact GELU, or the
residual add, which inference uses.

Used for fp32 CPU tensors, and in inference for bf16 ones (a model cast to bf16: nlp/models/
precision.py; GELU and the residual add fused as in fp32, which saves a pass over the GEMM's
output); everything else (CUDA, autocast, other dtypes, a torch built
without oneDNN) takes `F.linear`. Results agree with `F.linear` to float rounding (~1e-6). The
encoder calls these through its kernels (nlp.models.fast_paths), which a model picks when it is
built: `NLP_ONEDNN_LINEAR=0` in the environment then leaves them out; so does tracing under
`torch.export` for ONNX export, which has no translation of the private op.
"""

from __future__ import annotations

import functools
import os

import torch
import torch.nn.functional as F

__all__ = ["linear", "linear_gelu", "linear_add", "onednn_linear_available", "limit_onednn_cache",
           "ONEDNN_CACHE_ENTRIES", "ONEDNN_SERVING_CACHE_ENTRIES"]

# oneDNN keeps a compiled matmul per shape (up to 1,024 by default). With dynamic padding every
# batch length is a new shape, and the cache grew a bf16 fine-tune by ~5 MB a step (ernie-tiny-zh:
# 1.1 GB -> 1.8 GB over 120 steps). 64 entries kept the step time (156 vs 162 ms) at fp32's memory
# level; 16 cost 15% (recompiling).
ONEDNN_CACHE_ENTRIES = 64
# A server's GEMMs in row buckets (nlp.models.fast_paths.gemm_row_bucket) come in ~32 row counts x
# 4 weight shapes per layer, plus the heads': all cached, none recompiled after the warm-up.
ONEDNN_SERVING_CACHE_ENTRIES = 256


def limit_onednn_cache(entries: int = ONEDNN_CACHE_ENTRIES) -> None:
    """Bound oneDNN's per-shape cache; effective before the process's first oneDNN matmul (it
    reads the setting once). A value the user exported is kept."""
    os.environ.setdefault("ONEDNN_PRIMITIVE_CACHE_CAPACITY", str(entries))


def onednn_linear_available() -> bool:
    """True unless `NLP_ONEDNN_LINEAR=0` is set, when this torch has oneDNN's linear op and it
    agrees with `F.linear` here (the op is checked once per process). Models read it when they
    are built (nlp.models.fast_paths.select_ops)."""
    return os.environ.get("NLP_ONEDNN_LINEAR", "1") != "0" and _onednn_linear_works()


@functools.cache
def _onednn_linear_works() -> bool:
    if not torch.backends.mkldnn.is_available():
        return False
    limit_onednn_cache()
    return _agrees_with_f_linear(torch.float32, atol=1e-5)


@functools.cache
def _onednn_bf16_linear_works() -> bool:
    """oneDNN's linear on bf16 tensors runs here and agrees with `F.linear` (checked once)."""
    return _onednn_linear_works() and _agrees_with_f_linear(torch.bfloat16, atol=0.1)


def _agrees_with_f_linear(dtype: torch.dtype, atol: float) -> bool:
    """oneDNN's linear op runs on `dtype` tensors and gives F.linear's numbers (within `atol`)."""
    try:
        op = torch.ops.mkldnn._linear_pointwise
        g = torch.Generator().manual_seed(0)
        x, w, b = (t.to(dtype) for t in (torch.randn(5, 8, generator=g), torch.randn(6, 8, generator=g),
                                        torch.randn(6, generator=g)))
        with torch.no_grad():
            return bool(torch.allclose(op(x, w, b, "none", [], "").float(), F.linear(x, w, b).float(), atol=atol))
    except (AttributeError, RuntimeError):  # private op absent or changed, or no kernel for this dtype here
        return False


def _eligible(x: torch.Tensor, weight: torch.Tensor) -> bool:
    # Mismatched shapes go to F.linear too, for its clear error (oneDNN's names no shapes).
    if (torch.compiler.is_exporting() or x.device.type != "cpu" or x.dtype != weight.dtype
            or x.dim() < 2 or weight.dim() != 2 or x.shape[-1] != weight.shape[1]
            or torch.is_autocast_enabled("cpu")):
        return False
    if x.dtype == torch.float32:
        return _onednn_linear_works()
    # bf16 in inference only: training in bf16 runs under autocast, on fp32 weights
    return x.dtype == torch.bfloat16 and not _needs_grad(x, weight) and _onednn_bf16_linear_works()


def _needs_grad(*tensors: torch.Tensor | None) -> bool:
    return torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in tensors)


class _OneDnnLinear(torch.autograd.Function):
    """y = x W^T + b with oneDNN for y and dL/dx, MKL's mm for dL/dW (faster there)."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
        ctx.save_for_backward(x, weight)
        ctx.has_bias = bias is not None
        return torch.ops.mkldnn._linear_pointwise(x, weight, bias, "none", [], "")

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        x, weight = ctx.saved_tensors
        grad = grad.contiguous()
        grad_x = grad_w = grad_b = None
        if ctx.needs_input_grad[0]:
            grad_x = torch.ops.mkldnn._linear_pointwise(grad, weight.t(), None, "none", [], "")
        flat = grad.reshape(-1, grad.shape[-1])
        if ctx.needs_input_grad[1]:
            grad_w = flat.t().mm(x.reshape(-1, x.shape[-1]))
        if ctx.has_bias and ctx.needs_input_grad[2]:
            grad_b = flat.sum(0)
        return grad_x, grad_w, grad_b


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """`F.linear(x, weight, bias)`."""
    if not _eligible(x, weight):
        return F.linear(x, weight, bias)
    x = x.contiguous()
    if _needs_grad(x, weight, bias):
        return _OneDnnLinear.apply(x, weight, bias)
    return torch.ops.mkldnn._linear_pointwise(x, weight, bias, "none", [], "")


def linear_gelu(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor | None:
    """`F.gelu(F.linear(x, weight, bias))` (exact GELU) in one oneDNN call; None where that does
    not apply (not eligible, or autograd needs the pre-activation): the caller computes it."""
    if not _eligible(x, weight) or _needs_grad(x, weight, bias):
        return None
    return torch.ops.mkldnn._linear_pointwise(x.contiguous(), weight, bias, "gelu", [], "none")


def linear_add(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
               other: torch.Tensor) -> torch.Tensor | None:
    """`F.linear(x, weight, bias) + other` in one oneDNN call (the add fused into the GEMM);
    None where that does not apply (not eligible, or under autograd)."""
    if not _eligible(x, weight) or other.dtype != x.dtype or _needs_grad(x, weight, bias, other):
        return None
    return torch.ops.mkldnn._linear_pointwise.binary(x.contiguous(), other.contiguous(), weight, bias, "add")
