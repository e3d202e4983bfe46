"""The encoder's kernels, plain or fast: one interface, chosen once when a model is built.

`ErnieLayer` says what a layer computes (attention, feed-forward, residuals, norms) and hands the
heavy pieces to `self.ops`: the linear projections, the feed-forward's first linear with its
activation, `residual + dropout(linear(h))`, attention, dropout, and the last layer at a few rows.
Two implementations share that interface:

* `TorchOps`: plain PyTorch (`F.linear`, `F.dropout`, `F.scaled_dot_product_attention`, the full
  last layer). The reference: what the architecture means, on any device.
* `FastOps` (the default): the same math with the fast paths that profiled worth keeping.
  - fp32 CPU linears through oneDNN (nlp.models._linear, private op
    `torch.ops.mkldnn._linear_pointwise`), in inference with exact GELU or the residual add
    fused into the GEMM as oneDNN epilogues;
  - fp32 CPU inference without those epilogues: GELU / ReLU applied in place on the GEMM's output
    (private op `torch._addmm_activation`), and the GEMM accumulating straight into
    residual + bias (`addmm_`): each saves a pass over a (B, T, H) or (B, T, 4H) tensor;
  - dropout masks drawn from 16-bit lanes of 64-bit random words on CPU (nlp.models.dropout),
    also inside attention when attention dropout is on (SDPA's fused CPU kernel has no dropout,
    and its fallback draws a slow `bernoulli_` mask);
  - attention in fp32 when training under CPU bf16 autocast (torch's bf16 CPU attention
    backward is slow);
  - in CPU inference, the attention of short rows (up to SHORT_ATTENTION_TOKENS) as two batched
    GEMMs around a softmax instead of SDPA's flash kernel, which is tiled for long rows;
  - a pooled request (sequence classification) runs the last layer at the [CLS] rows only;
  - off by default, for servers (`bucket_gemm_rows`): inference GEMMs at bucketed row counts
    (`gemm_row_bucket`), zero rows added and cut off again, so that a server's mix of batch
    shapes compiles a bounded set of oneDNN kernels.
  Both run a linear layer through its packed int8 copy where one was made (precision "int8",
  nlp.models.int8_linear) and applies.
  Each applies only where it is valid (device, dtype, autograd, autocast: checked per call, as
  those change between calls); elsewhere FastOps runs what TorchOps runs, with nlp.models.dropout's
  masks. Results agree with TorchOps to float rounding; dropout masks differ (another generator
  use), so a run is reproducible under one switch setting, not across them. While a model is
  traced by `torch.export` (`nlp export`), FastOps runs TorchOps' plain ATen ops: ONNX has no
  translation of the private ops, and int8 quantization skips fused Gemm epilogues.

The switch, read by `select_ops()` when a model is built (`ErnieModel.__init__`):
    NLP_FAST_PATHS=0      TorchOps for models built from then on.
    NLP_ONEDNN_LINEAR=0   FastOps without the oneDNN linears (MKL's sgemm through `F.linear`).
The private torch ops are looked up once, at selection; a torch build without them gets FastOps
without the paths that need them (tests/models/test_fast_paths.py removes each one and checks
the outputs).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any, Callable

import torch
import torch.nn.functional as F
from torch import nn

from . import _linear
from .dropout import dropout, residual_dropout
from .int8_linear import int8_linear

__all__ = ["FAST_PATHS_ENV", "FastOps", "Rows", "TorchOps", "bucket_gemm_rows", "gemm_row_bucket", "select_ops"]

FAST_PATHS_ENV = "NLP_FAST_PATHS"
Activation = Callable[[torch.Tensor], torch.Tensor]


@dataclass(frozen=True)
class Rows:
    """Positions whose last-layer output is wanted (the pooler's [CLS] tokens): `batch[i]`,
    `position[i]` for i < N; `one_per_row` when they are position 0 of every row, in order."""

    batch: torch.Tensor
    position: torch.Tensor
    one_per_row: bool


def _needs_grad(x: torch.Tensor, weight: torch.Tensor) -> bool:
    return torch.is_grad_enabled() and (x.requires_grad or weight.requires_grad)


class TorchOps:
    """Plain PyTorch: the reference every fast path is tested against."""

    def linear(self, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
        if (y := int8_linear(x, weight)) is not None:  # precision "int8": the weight's packed copy
            return y
        return F.linear(x, weight, bias)

    def linear_act(self, x: torch.Tensor, layer: nn.Linear, act: Activation) -> torch.Tensor:
        """act(layer(x))."""
        return act(self.linear(x, layer.weight, layer.bias))

    def residual_linear(self, h: torch.Tensor, layer: nn.Linear, residual: torch.Tensor, p: float) -> torch.Tensor:
        """residual + Dropout_p(layer(h))."""
        y = self.linear(h, layer.weight, layer.bias)
        return residual + (F.dropout(y, p) if p > 0.0 else y)

    def dropout(self, x: torch.Tensor, p: float) -> torch.Tensor:
        return F.dropout(x, p) if p > 0.0 else x

    def attention(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None,
                  p: float) -> torch.Tensor:
        """softmax(q k^T / sqrt(d), masked) with dropout p, @ v; q (B, nh, Tq, hd), k and v
        (B, nh, T, hd); mask bool (True = may attend), broadcastable to (B, nh, Tq, T)."""
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p)

    def layer_at_rows(self, layer: nn.Module, x: torch.Tensor, attn: Any, rows: Rows) -> torch.Tensor:
        """`layer(x, attn)[rows.batch, rows.position]`, (N, H). Called from inside the layer's
        own call (`ErnieLayer.forward(x, attn, rows)`), so it runs `layer.forward`, not the
        module again: the layer's hooks (a sharding unit's weight gather) have run once already."""
        return layer.forward(x, attn)[rows.batch, rows.position]


class FastOps(TorchOps):
    """TorchOps plus the fast paths of the module docstring; the flags say which private torch
    ops this build has (`select_ops` checks them)."""

    def __init__(self, onednn_linear: bool, onednn_linear_add: bool, addmm_activation: bool) -> None:
        self.onednn_linear = onednn_linear
        self.onednn_linear_add = onednn_linear and onednn_linear_add
        self.addmm_activation = addmm_activation
        self.row_buckets = False  # set by nlp.models.bucket_gemm_rows (servers)

    def __repr__(self) -> str:
        return (f"FastOps(onednn_linear={self.onednn_linear}, onednn_linear_add={self.onednn_linear_add}, "
                f"addmm_activation={self.addmm_activation}, row_buckets={self.row_buckets})")

    def _bucketed(self, x: torch.Tensor) -> tuple[torch.Tensor, int] | None:
        """(x as (rows, features) zero-padded to its row bucket, rows) when row buckets are on,
        in CPU inference, and x's rows are not a bucket already; else None."""
        if not self.row_buckets or x.device.type != "cpu" or torch.is_grad_enabled() or torch.compiler.is_exporting():
            return None
        flat = x.reshape(-1, x.shape[-1])
        rows = flat.shape[0]
        target = gemm_row_bucket(rows)
        if target == rows:
            return None
        return torch.cat([flat, flat.new_zeros(target - rows, flat.shape[1])]), rows

    def linear(self, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
        if (y := int8_linear(x, weight)) is not None:  # precision "int8" (no per-shape kernels to bucket)
            return y
        if (padded := self._bucketed(x)) is not None:
            return self.linear(padded[0], weight, bias)[:padded[1]].view(*x.shape[:-1], weight.shape[0])
        if self.onednn_linear:
            return _linear.linear(x, weight, bias)  # F.linear where oneDNN does not apply
        return F.linear(x, weight, bias)

    def linear_act(self, x: torch.Tensor, layer: nn.Linear, act: Activation) -> torch.Tensor:
        """In fp32 CPU inference the activation is fused into the GEMM: exact GELU as oneDNN's
        epilogue, or, without oneDNN (and for ReLU), in place on the GEMM's output
        (`torch._addmm_activation`), saving an allocation and a pass over the (B, T, 4H) tensor,
        ~4% of an ernie-3.0-base forward. Not on CUDA (its fused epilogue is the tanh GELU), not
        under autograd (the backward needs the pre-activation), not under autocast (these ops are
        not on autocast's list)."""
        if torch.compiler.is_exporting():  # plain ATen ops for torch.export (ONNX)
            return super().linear_act(x, layer, act)
        if (y := int8_linear(x, layer.weight)) is not None:
            return act(y)
        if (padded := self._bucketed(x)) is not None:
            return self.linear_act(padded[0], layer, act)[:padded[1]].view(*x.shape[:-1], layer.out_features)
        weight, bias = layer.weight, layer.bias
        inplace = "gelu" if act is F.gelu else "relu" if act is F.relu else None
        if inplace == "gelu" and self.onednn_linear:
            fused = _linear.linear_gelu(x, weight, bias)  # None where oneDNN does not apply
            if fused is not None:
                return fused
        if (inplace is not None and self.addmm_activation and x.device.type == "cpu"
                and not torch.is_autocast_enabled("cpu") and not _needs_grad(x, weight)):
            out = torch._addmm_activation(bias, x.reshape(-1, x.shape[-1]), weight.t(), use_gelu=inplace == "gelu")
            return out.view(*x.shape[:-1], out.shape[-1])
        return act(self.linear(x, weight, bias))

    def residual_linear(self, h: torch.Tensor, layer: nn.Linear, residual: torch.Tensor, p: float) -> torch.Tensor:
        """With dropout: `residual + mask * y / (1 - p)` in one pass (`addcmul`, the fast mask).
        Without, in fp32 CPU inference, the residual add is fused into the GEMM (oneDNN's binary
        epilogue; without oneDNN the GEMM accumulates straight into residual + bias): this saves
        the bias broadcast-copy and the separate add, passes over (B, T, H) that profile at ~15% of
        inference time on CPU. Not under autocast: the fused ops are not autocast, and would meet
        bf16 activations with fp32 weights."""
        if torch.compiler.is_exporting():  # plain ATen ops for torch.export (ONNX)
            return super().residual_linear(h, layer, residual, p)
        if p == 0.0 and (y := int8_linear(h, layer.weight)) is not None:
            return y.add_(residual)
        if (padded := self._bucketed(h)) is not None:
            rest = self._bucketed(residual)
            assert rest is not None  # the same rows as h
            return self.residual_linear(padded[0], layer, rest[0], p)[:padded[1]].view(residual.shape)
        weight, bias = layer.weight, layer.bias
        if p > 0.0:
            return residual_dropout(residual, self.linear(h, weight, bias), p)
        if self.onednn_linear_add:
            fused = _linear.linear_add(h, weight, bias, residual)  # None where oneDNN does not apply
            if fused is not None:
                return fused
        if h.device.type != "cpu" or torch.is_autocast_enabled("cpu") or _needs_grad(h, weight):
            return residual + self.linear(h, weight, bias)
        out = residual + bias  # (B, T, H), a fresh tensor the GEMM may write into
        out.view(-1, out.shape[-1]).addmm_(h.reshape(-1, h.shape[-1]), weight.t())
        return out

    def dropout(self, x: torch.Tensor, p: float) -> torch.Tensor:
        return dropout(x, p)

    def attention(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None,
                  p: float) -> torch.Tensor:
        if p > 0.0 and q.device.type == "cpu":
            return _attention_with_dropout(q, k, v, mask, p)
        if _short_rows(q, k, v, mask):
            return _short_attention(q, k, v, mask)
        return _sdpa(q, k, v, mask, p)

    def layer_at_rows(self, layer: nn.Module, x: torch.Tensor, attn: Any, rows: Rows) -> torch.Tensor:
        """The same numbers as `layer(x, attn)[rows.batch, rows.position]` (to float rounding),
        but queries, attention output and FFN run for those N positions instead of all B x T
        (keys and values still come from every token): about a fifth of a 4-layer encoder's
        work, 40% of a 2-layer one's. flash-attn varlen (packed rows on CUDA) has no per-query
        form: there the full layer runs."""
        if attn.indices is not None:
            return super().layer_at_rows(layer, x, attn, rows)
        p = layer.hidden_dropout if layer.training else 0.0
        picked = x[rows.batch, rows.position]  # (N, H)
        ctx = self._attend_rows(layer, x, picked, attn.mask, rows)  # (N, H)
        h = layer.attn_norm(self.residual_linear(ctx, layer.attn_out, picked, p))
        return layer.ffn_norm(self.residual_linear(self.linear_act(h, layer.ffn_in, layer.act), layer.ffn_out, h, p))

    def _attend_rows(self, layer: nn.Module, x: torch.Tensor, picked: torch.Tensor, mask: torch.Tensor | None,
                     rows: Rows) -> torch.Tensor:
        B, T = x.shape[:2]
        N, nh, hd = picked.shape[0], layer.num_heads, layer.head_dim
        A = nh * hd  # the attention width: the hidden size unless heads were pruned
        w, b = layer.qkv.weight, layer.qkv.bias  # rows: q; k; v
        q = self.linear(picked, w[:A], b[:A]).view(N, 1, nh, hd).transpose(1, 2)  # (N, nh, 1, hd)
        k, v = self.linear(x, w[A:], b[A:]).view(B, T, 2, nh, hd).permute(2, 0, 3, 1, 4).unbind(0)  # (B, nh, T, hd)
        if not rows.one_per_row:  # queries of packed sequences: each sees its own row's keys
            k, v = k[rows.batch], v[rows.batch]  # (N, nh, T, hd)
            mask = None if mask is None else mask[rows.batch, :, rows.position].unsqueeze(2)  # (N, 1, 1, T)
        ctx = _sdpa(q, k, v, mask, layer.attn_dropout if layer.training else 0.0)  # (N, nh, 1, hd)
        return ctx.reshape(N, A)


def gemm_row_bucket(rows: int) -> int:
    """The row count an inference GEMM of `rows` rows runs at when row buckets are on: a multiple
    of 64 up to 512; past that, of 1/16 of the next power of two (under 1/8 more rows): 32
    buckets up to 4,096 rows.

    oneDNN compiles a kernel per GEMM shape, and every batch of a server has another row count
    (rows x padded length). Kernels are cached (64 entries) and evicted, and creating and
    dropping them grows the heap: on ernie-3.0-mini in bf16, ~2.5 MB per new row count, +125 MB
    over 132 batches of mixed shapes even with the cache off. In buckets, a server's GEMMs come
    in a few dozen shapes, whose kernels stay cached: the heap stops growing once it has seen them."""
    step = 64 if rows <= 512 else 1 << ((rows - 1).bit_length() - 4)
    return max(step, -(-rows // step) * step)


def bucket_gemm_rows(model: nn.Module, enabled: bool = True) -> bool:
    """Run `model`'s encoder GEMMs in inference at bucketed row counts (gemm_row_bucket): what a
    long-running server wants, so that its memory stays flat whatever mix of batch shapes it
    sees. Outputs are unchanged, to float rounding (the padding rows are zeros, cut off after
    each GEMM). True when
    the model has fast-path kernels to set (a TorchOps model, NLP_FAST_PATHS=0, has none)."""
    found = False
    for module in model.modules():
        ops = getattr(module, "ops", None)
        if isinstance(ops, FastOps):
            ops.row_buckets = enabled
            found = True
    return found


def _sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None, p: float) -> torch.Tensor:
    """`scaled_dot_product_attention`; in fp32 when training under CPU autocast. Autocast would
    run it in bf16, and torch's bf16 CPU flash-attention backward is slow: profiled in a bf16
    fine-tune of ernie-tiny-zh, it took a fifth of the step (fp32: ~1%), more than the bf16 GEMMs
    gained. Attention is a small share of the FLOPs at these lengths; the projections stay in
    bf16. Without autograd (inference) the bf16 forward kernel is the faster one."""
    if (q.device.type == "cpu" and torch.is_autocast_enabled("cpu") and torch.is_grad_enabled()
            and (q.requires_grad or k.requires_grad or v.requires_grad)):
        with torch.autocast("cpu", enabled=False):
            return F.scaled_dot_product_attention(q.float(), k.float(), v.float(), attn_mask=mask, dropout_p=p)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p)


def _attention_with_dropout(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None,
                            p: float) -> torch.Tensor:
    """softmax(q k^T / sqrt(d) | mask) with dropout, @ v: what SDPA computes, for CPU training
    with attention dropout. SDPA's fused CPU kernel has no dropout, so at p > 0 it falls back to
    its unfused math path, whose `bernoulli_` mask over (B, heads, T, T) costs more than the
    attention matmuls; this path is the same math with the fast mask of nlp.models.dropout."""
    scores = torch.matmul(q * (1.0 / math.sqrt(q.shape[-1])), k.transpose(-1, -2))  # (B, nh, T, T)
    if mask is not None:
        scores.masked_fill_(~mask, torch.finfo(scores.dtype).min)
    return torch.matmul(dropout(torch.softmax(scores, dim=-1), p), v)


# Rows up to this many tokens attend through `_short_attention` in CPU inference: for short rows
# one batched matmul per step beats SDPA's flash kernel, whose tiling pays off only on long rows;
# past about 128 tokens flash is ahead (in fp32 first), so the cutoff sits there.
SHORT_ATTENTION_TOKENS = 128
_SHORT_ATTENTION_SCORES = 1 << 24  # at most this many scores (B x heads x T x T) held at once


def _short_rows(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None) -> bool:
    """`_short_attention` applies: CPU inference outside autocast (where SDPA casts once; the
    batched GEMMs would cast each operand) and outside torch.export, fp32 or bf16, rows of at
    most SHORT_ATTENTION_TOKENS keys and a bounded score matrix."""
    B, nh, Tq, _ = q.shape
    T = k.shape[-2]
    return (q.device.type == "cpu" and q.dtype in (torch.float32, torch.bfloat16)
            and q.dtype == k.dtype == v.dtype and T <= SHORT_ATTENTION_TOKENS
            and B * nh * Tq * T <= _SHORT_ATTENTION_SCORES
            and not (torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad))
            and not torch.is_autocast_enabled("cpu") and not torch.compiler.is_exporting()
            and (mask is None or mask.dtype == torch.bool or mask.dtype == q.dtype))


def _short_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """softmax(q k^T / sqrt(d) + mask) v as two batched GEMMs, for short rows (see
    SHORT_ATTENTION_TOKENS): the scores of a key the mask forbids are the dtype's minimum, added
    to the GEMM's output by `baddbmm`. q (B, nh, Tq, hd), k and v (B, nh, T, hd); mask bool
    (True = may attend) or additive, broadcastable to (B, nh, Tq, T)."""
    B, nh, Tq, hd = q.shape
    T = k.shape[-2]
    scale = 1.0 / math.sqrt(hd)
    q3, k3, v3 = q.reshape(B * nh, Tq, hd), k.reshape(B * nh, T, hd), v.reshape(B * nh, T, hd)
    if mask is None:
        scores = torch.bmm(q3, k3.transpose(1, 2)).mul_(scale)
    else:
        if mask.dtype == torch.bool:
            mask = torch.zeros(mask.shape, dtype=q.dtype).masked_fill_(~mask, torch.finfo(q.dtype).min)
        while mask.dim() < 4:
            mask = mask.unsqueeze(0)
        add = mask.expand(B, nh, mask.shape[-2], T).reshape(B * nh, mask.shape[-2], T)
        scores = torch.baddbmm(add, q3, k3.transpose(1, 2), alpha=scale)
    # softmax from bf16 scores into fp32 and back: half the time of torch's bf16 softmax kernel
    # over rows this short (0.16 vs 0.30 ms at 128 x 48 x 48), and the sums in fp32
    probs = torch.softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype)
    return torch.bmm(probs, v3).view(B, nh, Tq, hd)


def _has_onednn_linear_add() -> bool:
    try:
        return hasattr(torch.ops.mkldnn._linear_pointwise, "binary")
    except (AttributeError, RuntimeError):  # private op: absent in this torch build
        return False


def select_ops() -> TorchOps:
    """The kernels for a model built now: TorchOps under NLP_FAST_PATHS=0, else FastOps with
    the private torch ops this build has (and oneDNN's linears unless NLP_ONEDNN_LINEAR=0)."""
    if os.environ.get(FAST_PATHS_ENV, "1") == "0":
        return TorchOps()
    onednn = _linear.onednn_linear_available()
    return FastOps(onednn_linear=onednn, onednn_linear_add=onednn and _has_onednn_linear_add(),
                   addmm_activation=hasattr(torch, "_addmm_activation"))
