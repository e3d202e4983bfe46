"""ERNIE (and the BERT-architecture Chinese checkpoints): a post-LayerNorm Transformer encoder.

Papers: ERNIE (Sun et al. 2019, arXiv:1904.09223); ERNIE 3.0 (Sun et al. 2021, arXiv:2107.02137);
BERT (Devlin et al. 2018, arXiv:1810.04805). Reference code: PaddleNLP
`paddlenlp/transformers/ernie/modeling.py` and transformers `models/ernie/modeling_ernie.py`
(both Apache-2.0). Weights: the ERNIE checkpoints are published by Baidu under Apache-2.0, the
Chinese BERT/RoBERTa/MacBERT checkpoints by Google and HFL under Apache-2.0.

Written here from the papers' architecture, not wrapping transformers: one fused QKV projection,
attention through `scaled_dot_product_attention` (or flash-attn's varlen kernel for packed rows
on CUDA), packed rows (several sequences per row, block-diagonal attention), per-layer gradient
checkpointing; dropout masks drawn fast on CPU (nlp.models.dropout), also inside attention when
attention dropout is on (SDPA's fused CPU kernel has no dropout); fp32 CPU linears through oneDNN
with GELU / residual-add epilogues in inference (nlp.models._linear). The checkpoint-key table at
the end maps these names to transformers' on disk.

Under `torch.export` (`torch.compiler.is_exporting()`, as in `nlp export`) the model traces as
plain ATen ops: every linear is `F.linear` (no oneDNN ops, which ONNX cannot express, and no
fused addmm epilogues, whose 2-D Gemm nodes onnxruntime's int8 quantizer skips), the attention mask
always applied, and no checks that read tensor values (the exported graph must not depend on
the example it was traced with).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

from nlp._common import DataError

from ._modeling import EncoderOutput, MaskedLMOutput, PreTrainedEncoder
from ._linear import linear, linear_add, linear_gelu
from .config import ErnieConfig
from .dropout import dropout, residual_dropout

try:  # optional: only used on CUDA for packed rows
    from flash_attn import flash_attn_varlen_func as _flash_varlen
except ImportError:  # pragma: no cover - not installed on CPU machines
    _flash_varlen = None

__all__ = ["ErnieModel", "ErnieForMaskedLM", "ErnieConfig"]


def _activation(name: str):
    if name == "gelu":
        return F.gelu
    if name in ("gelu_new", "gelu_pytorch_tanh"):
        return lambda x: F.gelu(x, approximate="tanh")
    if name == "relu":
        return F.relu
    if name in ("silu", "swish"):
        return F.silu
    raise ValueError(f"unsupported activation {name!r}")  # ErnieConfig validates before this


# ---------------------------------------------------------------------------------- attention mask
@dataclass
class _Attention:
    """What every layer needs to attend: an SDPA mask, or the varlen layout of packed rows."""

    mask: torch.Tensor | None = None  # bool, True = may attend; (B,1,1,T) or (B,1,T,T); None = all
    # flash-attn varlen (packed rows on CUDA): flat indices of real tokens, cumulative lengths
    indices: torch.Tensor | None = None
    cu_seqlens: torch.Tensor | None = None
    max_seqlen: int = 0


@dataclass
class _Rows:
    """Positions whose last-layer output is needed (the pooler's [CLS] tokens): `batch[i]`,
    `position[i]` for i < N; `one_per_row` when they are position 0 of every row, in order."""

    batch: torch.Tensor
    position: torch.Tensor
    one_per_row: bool


def _cls_rows(pack_ids: torch.Tensor | None, B: int, device: torch.device) -> _Rows:
    """The [CLS] positions: token 0 of every row, or the first token of every packed sequence
    (row-major, the order of the packing collator's labels)."""
    if pack_ids is None:
        return _Rows(torch.arange(B, device=device), torch.zeros(B, dtype=torch.long, device=device), True)
    first = pack_ids.gt(0) & pack_ids.ne(F.pad(pack_ids, (1, 0))[:, :-1])
    batch, position = first.nonzero(as_tuple=True)
    return _Rows(batch, position, False)


def _build_attention(attention_mask, pack_ids, device_type: str, dtype: torch.dtype) -> _Attention:
    if pack_ids is not None:
        if (_flash_varlen is not None and device_type == "cuda"
                and dtype in (torch.float16, torch.bfloat16)):
            flat = pack_ids.reshape(-1)
            indices = torch.nonzero(flat > 0, as_tuple=False).flatten()
            row = torch.div(indices, pack_ids.shape[1], rounding_mode="floor")
            seq_key = row * (int(pack_ids.max()) + 1) + flat[indices]  # unique per (row, seq)
            _, lengths = torch.unique_consecutive(seq_key, return_counts=True)
            cu = F.pad(torch.cumsum(lengths, 0, dtype=torch.int32), (1, 0))
            return _Attention(indices=indices, cu_seqlens=cu, max_seqlen=int(lengths.max()))
        # Block-diagonal: a token sees the tokens of its own sequence. Padding (id 0) sees
        # padding only, so no query row is fully masked (which would give NaN).
        mask = pack_ids[:, None, :, None] == pack_ids[:, None, None, :]  # (B,1,T,T)
        return _Attention(mask=mask)
    # Under torch.export (ONNX export) the mask is always applied: whether a batch has padding
    # is data, and a graph must not bake in the answer of the example it was traced with.
    if attention_mask is None or (not torch.compiler.is_exporting() and bool(attention_mask.all())):
        return _Attention()  # no padding: SDPA without a mask (its fastest path)
    return _Attention(mask=attention_mask[:, None, None, :].bool())  # (B,1,1,T) key padding


# ---------------------------------------------------------------------------------- blocks
class ErnieEmbeddings(nn.Module):
    """word + position + token-type (+ task-type) embeddings, LayerNorm, dropout."""

    def __init__(self, config: ErnieConfig) -> None:
        super().__init__()
        h = config.hidden_size
        self.word = nn.Embedding(config.vocab_size, h, padding_idx=config.pad_token_id)
        self.position = nn.Embedding(config.max_position_embeddings, h)
        self.token_type = nn.Embedding(config.type_vocab_size, h)
        self.task_type = nn.Embedding(config.task_type_vocab_size, h) if config.use_task_id else None
        self.norm = nn.LayerNorm(h, eps=config.layer_norm_eps)
        self.dropout = config.hidden_dropout_prob

    def forward(self, input_ids, token_type_ids, task_type_ids, position_ids) -> torch.Tensor:
        T = input_ids.shape[1]
        x = self.word(input_ids)  # (B, T, H)
        # Default ids are all-zero / 0..T-1: add the rows directly instead of gathering.
        x = x + (self.position.weight[:T] if position_ids is None else self.position(position_ids))
        x = x + (self.token_type.weight[0] if token_type_ids is None else self.token_type(token_type_ids))
        if self.task_type is not None:
            x = x + (self.task_type.weight[0] if task_type_ids is None else self.task_type(task_type_ids))
        return dropout(self.norm(x), self.dropout, self.training)


class ErnieLayer(nn.Module):
    """Post-LN block: x = LN(x + Drop(Attn(x))); x = LN(x + Drop(FFN(x)))."""

    def __init__(self, config: ErnieConfig) -> None:
        super().__init__()
        h = config.hidden_size
        self.num_heads = config.num_attention_heads
        self.head_dim = config.head_dim
        self.qkv = nn.Linear(h, 3 * h)  # one matmul for q, k, v (rows: q; k; v)
        self.attn_out = nn.Linear(h, h)
        self.attn_norm = nn.LayerNorm(h, eps=config.layer_norm_eps)
        self.ffn_in = nn.Linear(h, config.intermediate_size)
        self.ffn_out = nn.Linear(config.intermediate_size, h)
        self.ffn_norm = nn.LayerNorm(h, eps=config.layer_norm_eps)
        self.act = _activation(config.hidden_act)
        # activations that torch._addmm_activation applies in place (exact GELU, ReLU)
        self._inplace_act = {"gelu": "gelu", "relu": "relu"}.get(config.hidden_act)
        self.hidden_dropout = config.hidden_dropout_prob
        self.attn_dropout = config.attention_probs_dropout_prob

    def attend(self, x: torch.Tensor, attn: _Attention) -> torch.Tensor:
        B, T, H = x.shape
        p = self.attn_dropout if self.training else 0.0
        qkv = linear(x, self.qkv.weight, self.qkv.bias)  # (B, T, 3H)
        if attn.indices is not None:  # packed rows, flash-attn varlen on CUDA
            qkv = qkv.reshape(B * T, 3, self.num_heads, self.head_dim)[attn.indices]  # (N, 3, nh, hd)
            q, k, v = qkv.unbind(1)
            ctx = _flash_varlen(q, k, v, attn.cu_seqlens, attn.cu_seqlens, attn.max_seqlen,
                                attn.max_seqlen, dropout_p=p, causal=False)  # (N, nh, hd)
            out = ctx.new_zeros(B * T, H)
            out[attn.indices] = ctx.reshape(-1, H)
            return out.view(B, T, H)
        q, k, v = qkv.view(B, T, 3, self.num_heads, self.head_dim).unbind(2)  # (B, T, nh, hd)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)  # (B, nh, T, hd)
        if p > 0.0 and x.device.type == "cpu":
            ctx = _attention_with_dropout(q, k, v, attn.mask, p)
        else:
            ctx = _sdpa(q, k, v, attn.mask, p)
        return ctx.transpose(1, 2).reshape(B, T, H)

    def forward(self, x: torch.Tensor, attn: _Attention) -> torch.Tensor:
        p = self.hidden_dropout if self.training else 0.0
        x = self.attn_norm(_residual_linear(self.attn_out, self.attend(x, attn), x, p))
        return self.ffn_norm(_residual_linear(self.ffn_out, self.intermediate(x), x, p))

    def intermediate(self, x: torch.Tensor) -> torch.Tensor:
        """act(ffn_in(x)). In fp32 CPU inference the activation is fused into the GEMM: exact
        GELU as oneDNN's epilogue (nlp.models._linear), or, without oneDNN (and for ReLU), in
        place on the GEMM's output (`torch._addmm_activation`), saving an allocation and a pass
        over the (B, T, 4H) tensor, ~4% of an ernie-3.0-base forward. Not on CUDA (its fused
        epilogue is the tanh GELU), not under autograd (the backward needs the pre-activation),
        not under autocast (these ops are not on autocast's list)."""
        w, b = self.ffn_in.weight, self.ffn_in.bias
        if self._inplace_act == "gelu":
            fused = linear_gelu(x, w, b)
            if fused is not None:
                return fused
        if (self._inplace_act is not None and x.device.type == "cpu" and not torch.is_autocast_enabled("cpu")
                and not torch.compiler.is_exporting()
                and not (torch.is_grad_enabled() and (x.requires_grad or w.requires_grad))):
            out = torch._addmm_activation(b, x.reshape(-1, x.shape[-1]), w.t(), use_gelu=self._inplace_act == "gelu")
            return out.view(*x.shape[:-1], out.shape[-1])
        return self.act(linear(x, w, b))

    def forward_rows(self, x: torch.Tensor, attn: _Attention, rows: _Rows) -> torch.Tensor:
        """The layer's output at the positions of `rows` only, (N, H): the same numbers as
        `forward(x, attn)[rows.batch, rows.position]`, but queries, attention output and FFN run
        for those N positions instead of all B x T (keys and values still come from every token)."""
        p = self.hidden_dropout if self.training else 0.0
        picked = x[rows.batch, rows.position]  # (N, H)
        h = self.attn_norm(_residual_linear(self.attn_out, self._attend_rows(x, picked, attn, rows), picked, p))
        return self.ffn_norm(_residual_linear(self.ffn_out, self.intermediate(h), h, p))

    def _attend_rows(self, x: torch.Tensor, picked: torch.Tensor, attn: _Attention, rows: _Rows) -> torch.Tensor:
        B, T, H = x.shape
        N, nh, hd = picked.shape[0], self.num_heads, self.head_dim
        w, b = self.qkv.weight, self.qkv.bias  # rows: q; k; v
        q = linear(picked, w[:H], b[:H]).view(N, 1, nh, hd).transpose(1, 2)  # (N, nh, 1, hd)
        k, v = linear(x, w[H:], b[H:]).view(B, T, 2, nh, hd).permute(2, 0, 3, 1, 4).unbind(0)  # (B, nh, T, hd)
        mask = attn.mask
        if not rows.one_per_row:  # queries of packed sequences: each sees its own row's keys
            k, v = k[rows.batch], v[rows.batch]  # (N, nh, T, hd)
            mask = None if mask is None else mask[rows.batch, :, rows.position].unsqueeze(2)  # (N, 1, 1, T)
        ctx = _sdpa(q, k, v, mask, self.attn_dropout if self.training else 0.0)
        return ctx.reshape(N, H)


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


def _residual_linear(layer: nn.Linear, h: torch.Tensor, residual: torch.Tensor, p: float) -> torch.Tensor:
    """residual + Dropout(layer(h)) (the dropout mask drawn fast on CPU: nlp.models.dropout).

    Without dropout, in fp32 CPU inference, the residual add is fused into the GEMM (oneDNN's
    binary epilogue; without oneDNN the GEMM accumulates straight into residual + bias): this
    saves the bias broadcast-copy and the separate add, passes over (B, T, H) that profile at
    ~15% of inference time on CPU. Not under autocast: the fused ops are not autocast, and would
    meet bf16 activations with fp32 weights.
    """
    w, b = layer.weight, layer.bias
    if p > 0.0:
        return residual_dropout(residual, linear(h, w, b), p)
    fused = linear_add(h, w, b, residual)  # None unless fp32 CPU inference with oneDNN
    if fused is not None:
        return fused
    if (h.device.type != "cpu" or torch.is_autocast_enabled("cpu") or torch.compiler.is_exporting()
            or (torch.is_grad_enabled() and (h.requires_grad or w.requires_grad))):
        return residual + linear(h, w, b)
    out = residual + b  # (B, T, H), a fresh tensor the GEMM may write into
    out.view(-1, out.shape[-1]).addmm_(h.reshape(-1, h.shape[-1]), w.t())
    return out


# ---------------------------------------------------------------------------------- models
class ErnieModel(PreTrainedEncoder):
    """The backbone: embeddings, encoder layers, pooler (dense + tanh on each sequence's [CLS])."""

    _HF_SUFFIX = "Model"

    def __init__(self, config: ErnieConfig, add_pooling_layer: bool = True) -> None:
        super().__init__(config)
        self.embeddings = ErnieEmbeddings(config)
        self.layers = nn.ModuleList(ErnieLayer(config) for _ in range(config.num_hidden_layers))
        self.pooler = nn.Linear(config.hidden_size, config.hidden_size) if add_pooling_layer else None
        self.gradient_checkpointing = False
        self.post_init()

    def _check_inputs(self, input_ids, attention_mask, token_type_ids, task_type_ids,
                      position_ids, pack_ids) -> None:
        c = self.config
        if not isinstance(input_ids, torch.Tensor):
            raise TypeError(f"input_ids must be a torch.Tensor, got {type(input_ids).__name__}")
        if input_ids.dtype.is_floating_point or input_ids.dtype == torch.bool:
            raise TypeError(f"input_ids must be an integer tensor (torch.long), got {input_ids.dtype}")
        if input_ids.dim() != 2:
            raise DataError(f"input_ids must have shape (batch, seq_len), got {tuple(input_ids.shape)}")
        B, T = input_ids.shape
        if T > c.max_position_embeddings and position_ids is None:
            raise DataError(
                f"sequence length {T} exceeds max_position_embeddings={c.max_position_embeddings}; "
                f"truncate the input (tokenizer truncation=True, max_length<={c.max_position_embeddings})"
            )
        # value checks read the data, which torch.export (ONNX export) cannot; shapes are still checked
        checks_values = not torch.compiler.is_exporting()
        if checks_values and input_ids.numel():
            lo, hi = int(input_ids.min()), int(input_ids.max())
            if lo < 0 or hi >= c.vocab_size:
                raise DataError(
                    f"input_ids holds id {hi if hi >= c.vocab_size else lo}, outside the vocabulary "
                    f"[0, {c.vocab_size}); the tokenizer does not match this model's vocab_size"
                )
        for name, value, limit in (
            ("attention_mask", attention_mask, None),
            ("token_type_ids", token_type_ids, c.type_vocab_size),
            ("task_type_ids", task_type_ids, c.task_type_vocab_size),
            ("position_ids", position_ids, c.max_position_embeddings),
            ("pack_ids", pack_ids, None),
        ):
            if value is None:
                continue
            if not isinstance(value, torch.Tensor):
                raise TypeError(f"{name} must be a torch.Tensor, got {type(value).__name__}")
            if tuple(value.shape) != (B, T):
                raise DataError(
                    f"{name} has shape {tuple(value.shape)} but input_ids has {(B, T)}; they must match"
                )
            if value.dtype.is_floating_point and name != "attention_mask":
                raise TypeError(f"{name} must be an integer tensor, got {value.dtype}")
            if checks_values and limit is not None and value.numel():
                lo, hi = int(value.min()), int(value.max())
                if lo < 0 or hi >= limit:
                    raise DataError(f"{name} holds {hi if hi >= limit else lo}, outside [0, {limit})")
        if task_type_ids is not None and not c.use_task_id:
            raise DataError("task_type_ids given but this model has no task-type embedding (use_task_id=False)")

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                token_type_ids: torch.Tensor | None = None, task_type_ids: torch.Tensor | None = None,
                position_ids: torch.Tensor | None = None, pack_ids: torch.Tensor | None = None,
                pooled_only: bool = False) -> EncoderOutput:
        """`pooled_only=True` (what sequence classification needs): the last layer computes only
        the [CLS] positions that the pooler reads, skipping its queries, attention output and FFN
        at every other token (about a fifth of the encoder's work for 4 layers, 40% for 2); the
        pooled output is the same, and `last_hidden_state` is None."""
        self._check_inputs(input_ids, attention_mask, token_type_ids, task_type_ids, position_ids, pack_ids)
        if pooled_only and self.pooler is None:
            raise ValueError("pooled_only=True needs the pooler (add_pooling_layer=True)")
        if pack_ids is not None and position_ids is None:
            position_ids = _positions_from_pack_ids(pack_ids)
        x = self.embeddings(input_ids, token_type_ids, task_type_ids, position_ids)
        attn = _build_attention(attention_mask, pack_ids, x.device.type, x.dtype)
        cls_rows = None if self.pooler is None else _cls_rows(pack_ids, x.shape[0], x.device)
        # flash-attn varlen (attn.indices) has no per-query form: it runs the full last layer
        rows_only = pooled_only and attn.indices is None and len(self.layers) > 0
        layers = self.layers[:-1] if rows_only else self.layers
        for layer in layers:
            x = self._run(layer, x, attn)
        if rows_only:
            cls = self._run(self.layers[-1].forward_rows, x, attn, cls_rows)  # (B|S, H)
            return EncoderOutput(last_hidden_state=None, pooler_output=torch.tanh(self.pooler(cls)))
        pooled = None
        if cls_rows is not None:
            pooled = torch.tanh(self.pooler(x[cls_rows.batch, cls_rows.position]))  # (B, H) or (S, H)
        return EncoderOutput(last_hidden_state=x, pooler_output=pooled)

    def _run(self, fn, *args):
        if self.gradient_checkpointing and self.training and torch.is_grad_enabled():
            return checkpoint(fn, *args, use_reentrant=False)
        return fn(*args)

    def _backbone_key_map(self) -> dict[str, list[str]]:
        return _to_hf_keys(self.state_dict().keys())


def _positions_from_pack_ids(pack_ids: torch.Tensor) -> torch.Tensor:
    """0, 1, 2, ... restarting at each new sequence of a packed row (padding gets 0)."""
    B, T = pack_ids.shape
    idx = torch.arange(T, device=pack_ids.device).expand(B, T)
    start = pack_ids.ne(F.pad(pack_ids, (1, 0), value=-1)[:, :-1])  # first token of each run
    start_idx = torch.where(start, idx, torch.zeros_like(idx)).cummax(dim=1).values
    return (idx - start_idx) * pack_ids.gt(0)


class ErnieForMaskedLM(PreTrainedEncoder):
    """Backbone (no pooler) + MLM head: dense, activation, LayerNorm, decoder tied to the word
    embeddings, plus an output bias."""

    _HF_SUFFIX = "ForMaskedLM"
    _HEAD_KEYS = {
        "mlm_dense.weight": "cls.predictions.transform.dense.weight",
        "mlm_dense.bias": "cls.predictions.transform.dense.bias",
        "mlm_norm.weight": "cls.predictions.transform.LayerNorm.weight",
        "mlm_norm.bias": "cls.predictions.transform.LayerNorm.bias",
        "mlm_bias": "cls.predictions.bias",
    }

    def __init__(self, config: ErnieConfig) -> None:
        super().__init__(config)
        self.backbone = ErnieModel(config, add_pooling_layer=False)
        self.mlm_dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.mlm_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.mlm_bias = nn.Parameter(torch.zeros(config.vocab_size))
        self.act = _activation(config.hidden_act)
        self.post_init()

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                token_type_ids: torch.Tensor | None = None, task_type_ids: torch.Tensor | None = None,
                position_ids: torch.Tensor | None = None, pack_ids: torch.Tensor | None = None,
                labels: torch.Tensor | None = None) -> MaskedLMOutput:
        x = self.backbone(input_ids, attention_mask, token_type_ids, task_type_ids,
                          position_ids, pack_ids).last_hidden_state
        h = self.mlm_norm(self.act(linear(x, self.mlm_dense.weight, self.mlm_dense.bias)))
        logits = linear(h, self.backbone.embeddings.word.weight, self.mlm_bias)  # tied decoder
        loss = None
        if labels is not None:
            if tuple(labels.shape) != tuple(input_ids.shape):
                raise DataError(f"labels has shape {tuple(labels.shape)}, input_ids {tuple(input_ids.shape)}")
            loss = F.cross_entropy(logits.view(-1, logits.shape[-1]), labels.reshape(-1), ignore_index=-100)
        return MaskedLMOutput(loss=loss, logits=logits)


# ---------------------------------------------------------------------------------- checkpoint keys
# Our backbone name -> transformers' name(s), relative to the backbone. "{i}" is the layer index.
# The fused qkv is stored as three tensors (query, key, value), concatenated on dim 0 in memory.
_KEY_TABLE: dict[str, tuple[str, ...]] = {
    "embeddings.word.weight": ("embeddings.word_embeddings.weight",),
    "embeddings.position.weight": ("embeddings.position_embeddings.weight",),
    "embeddings.token_type.weight": ("embeddings.token_type_embeddings.weight",),
    "embeddings.task_type.weight": ("embeddings.task_type_embeddings.weight",),
    "embeddings.norm.weight": ("embeddings.LayerNorm.weight",),
    "embeddings.norm.bias": ("embeddings.LayerNorm.bias",),
    "layers.{i}.qkv.weight": ("encoder.layer.{i}.attention.self.query.weight",
                              "encoder.layer.{i}.attention.self.key.weight",
                              "encoder.layer.{i}.attention.self.value.weight"),
    "layers.{i}.qkv.bias": ("encoder.layer.{i}.attention.self.query.bias",
                            "encoder.layer.{i}.attention.self.key.bias",
                            "encoder.layer.{i}.attention.self.value.bias"),
    "layers.{i}.attn_out.weight": ("encoder.layer.{i}.attention.output.dense.weight",),
    "layers.{i}.attn_out.bias": ("encoder.layer.{i}.attention.output.dense.bias",),
    "layers.{i}.attn_norm.weight": ("encoder.layer.{i}.attention.output.LayerNorm.weight",),
    "layers.{i}.attn_norm.bias": ("encoder.layer.{i}.attention.output.LayerNorm.bias",),
    "layers.{i}.ffn_in.weight": ("encoder.layer.{i}.intermediate.dense.weight",),
    "layers.{i}.ffn_in.bias": ("encoder.layer.{i}.intermediate.dense.bias",),
    "layers.{i}.ffn_out.weight": ("encoder.layer.{i}.output.dense.weight",),
    "layers.{i}.ffn_out.bias": ("encoder.layer.{i}.output.dense.bias",),
    "layers.{i}.ffn_norm.weight": ("encoder.layer.{i}.output.LayerNorm.weight",),
    "layers.{i}.ffn_norm.bias": ("encoder.layer.{i}.output.LayerNorm.bias",),
    "pooler.weight": ("pooler.dense.weight",),
    "pooler.bias": ("pooler.dense.bias",),
}


def _to_hf_keys(names) -> dict[str, list[str]]:
    out = {}
    for name in names:
        parts = name.split(".")
        if parts[0] == "layers":
            i = parts[1]
            template = ".".join(["layers", "{i}", *parts[2:]])
            out[name] = [t.format(i=i) for t in _KEY_TABLE[template]]
        else:
            out[name] = list(_KEY_TABLE[name])
    return out
