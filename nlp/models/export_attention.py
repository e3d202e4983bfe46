"""A layer's whole self-attention as one op, for ONNX export to onnxruntime.

    with fused_attention_export():
        torch.onnx.export(model, ..., dynamo=True, custom_translation_table=...)

Inside the context, under `torch.export`, every encoder layer calls `torch.ops.nlp.self_attention`
(hidden states, the fused qkv weight and bias, the (B, T) key padding mask, the head count)
instead of tracing its projection, head split, scaled dot product and merge as some twenty ATen
ops. `nlp.deploy.export` writes that op as one onnxruntime `com.microsoft.Attention` node, which
computes the qkv projection and attention with the heads in parallel, and which onnxruntime's
int8 quantizer turns into `QAttention` (an int8 qkv GEMM); the ATen graph left onnxruntime a
dozen unfused nodes per layer (docs/deploy.md).

The op's own implementation is the model's attention in plain PyTorch (the same numbers as
`ErnieLayer.attend`), so a model traced or run with it gives what the model gives.
Outside the context (and outside torch.export) nothing changes.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator

import torch
import torch.nn.functional as F

__all__ = ["fused_attention_export", "fused_attention_enabled", "self_attention"]

_ENABLED = contextvars.ContextVar("nlp_fused_attention_export", default=False)


@contextlib.contextmanager
def fused_attention_export() -> Iterator[None]:
    """Within this block, models being exported use `torch.ops.nlp.self_attention`."""
    token = _ENABLED.set(True)
    try:
        yield
    finally:
        _ENABLED.reset(token)


def fused_attention_enabled() -> bool:
    """True under torch.export inside `fused_attention_export()`."""
    return _ENABLED.get() and torch.compiler.is_exporting()


@torch.library.custom_op("nlp::self_attention", mutates_args=())
def self_attention(x: torch.Tensor, qkv_weight: torch.Tensor, qkv_bias: torch.Tensor, key_padding: torch.Tensor,
                   num_heads: int) -> torch.Tensor:
    """softmax(q k^T / sqrt(d) over the unpadded keys) v, heads merged: (B, T, A).

    x (B, T, H); qkv_weight (3A, H) with rows q; k; v (an nn.Linear's weight); qkv_bias (3A,);
    key_padding (B, T), nonzero = a real token (the tokenizer's attention_mask). A, the heads'
    width, is H unless width pruning kept fewer heads."""
    B, T = x.shape[:2]
    A = qkv_weight.shape[0] // 3
    qkv = F.linear(x, qkv_weight, qkv_bias).view(B, T, 3, num_heads, A // num_heads)
    q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)  # (B, nh, T, hd)
    ctx = F.scaled_dot_product_attention(q, k, v, attn_mask=key_padding[:, None, None, :].bool())
    return ctx.transpose(1, 2).reshape(B, T, A)


@self_attention.register_fake
def _(x: torch.Tensor, qkv_weight: torch.Tensor, qkv_bias: torch.Tensor, key_padding: torch.Tensor,
      num_heads: int) -> torch.Tensor:
    return x.new_empty(x.shape[0], x.shape[1], qkv_weight.shape[0] // 3)
