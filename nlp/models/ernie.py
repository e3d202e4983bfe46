"""ERNIE (and the BERT-architecture Chinese checkpoints, and XLM-RoBERTa): a post-LayerNorm Transformer encoder.

Papers: ERNIE (Sun et al. 2019, arXiv:1904.09223); ERNIE 3.0 (Sun et al. 2021, arXiv:2107.02137);
BERT (Devlin et al. 2018, arXiv:1810.04805); XLM-RoBERTa (Conneau et al. 2019, arXiv:1911.02116),
the same block with positions counted from pad_token_id + 1 and RoBERTa's key names on disk
(`roberta.`, `lm_head`; config model_type "xlm-roberta"). Reference code: PaddleNLP
`paddlenlp/transformers/ernie/modeling.py` and transformers `models/ernie/modeling_ernie.py`
(both Apache-2.0). Weights: the ERNIE checkpoints are published by Baidu under Apache-2.0, the
Chinese BERT/RoBERTa/MacBERT checkpoints by Google and HFL under Apache-2.0.

Written here from the papers' architecture, not wrapping transformers: one fused QKV projection,
attention through `scaled_dot_product_attention` (or flash-attn's varlen kernel for packed rows
on CUDA), packed rows (several sequences per row, block-diagonal attention; the pack_ids contract:
nlp._packing), per-layer gradient checkpointing. The layers show the architecture; the kernels
they call (linears, activation, residual + dropout, attention) come from `self.ops`, chosen once
when the model is built: plain PyTorch or the CPU fast paths (nlp.models.fast_paths, switch
`NLP_FAST_PATHS`). The checkpoint-key table at the end maps these names to transformers' on disk.

Under `torch.export` (`torch.compiler.is_exporting()`, as in `nlp export`) the model traces as
plain ATen ops: the fast paths step aside (no oneDNN ops, which ONNX cannot express, and no fused
addmm epilogues, whose 2-D Gemm nodes onnxruntime's int8 quantizer skips), the attention mask is
always applied, and no check reads tensor values (the exported graph must not depend on the
example it was traced with). Inside `nlp.models.export_attention.fused_attention_export()` each
layer's attention traces as one op, which the exporter writes as onnxruntime's Attention node.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

from nlp import _packing
from nlp._common import DataError

from ._modeling import EncoderOutput, MaskedLMOutput, PreTrainedEncoder
from .config import ErnieConfig
from .export_attention import fused_attention_enabled
from .fast_paths import Rows, TorchOps, select_ops

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

    # bool, True = may attend (under torch.export: additive float, 0 or the dtype's minimum);
    # (B,1,1,T) or (B,1,T,T); None = attend everywhere
    mask: torch.Tensor | None = None
    # exporting with one op per layer's attention (nlp.models.export_attention): the (B, T)
    # attention_mask that op takes
    key_padding: torch.Tensor | None = None
    # flash-attn varlen (packed rows on CUDA): flat indices of real tokens, cumulative lengths
    indices: torch.Tensor | None = None
    cu_seqlens: torch.Tensor | None = None
    max_seqlen: int = 0


def _cls_rows(pack_ids: torch.Tensor | None, B: int, device: torch.device) -> Rows:
    """The [CLS] positions: token 0 of every row, or the first token of every packed sequence
    (row-major, the order of the packing collator's labels)."""
    if pack_ids is None:
        return Rows(torch.arange(B, device=device), torch.zeros(B, dtype=torch.long, device=device), True)
    batch, position = _packing.sequence_starts(pack_ids)
    return Rows(batch, position, False)


def _build_attention(attention_mask, pack_ids, device_type: str, dtype: torch.dtype) -> _Attention:
    if pack_ids is not None:
        if (_flash_varlen is not None and device_type == "cuda"
                and dtype in (torch.float16, torch.bfloat16)):
            indices = torch.nonzero(pack_ids.reshape(-1) > 0, as_tuple=False).flatten()  # real tokens
            cu_seqlens, max_seqlen = _packing.cu_seqlens(pack_ids)
            return _Attention(indices=indices, cu_seqlens=cu_seqlens, max_seqlen=max_seqlen)
        # Block-diagonal: a token sees the tokens of its own sequence. Padding (id 0) sees
        # padding only, so no query row is fully masked (which would give NaN).
        mask = pack_ids[:, None, :, None] == pack_ids[:, None, None, :]  # (B,1,T,T)
        return _Attention(mask=mask)
    # Under torch.export (ONNX export) the mask is always applied: whether a batch has padding
    # is data, and a graph must not bake in the answer of the example it was traced with.
    if attention_mask is None or (not torch.compiler.is_exporting() and bool(attention_mask.all())):
        return _Attention()  # no padding: SDPA without a mask (its fastest path)
    if torch.compiler.is_exporting():
        # An additive mask (0 = may attend, the dtype's minimum = padding): the exported graph
        # adds it to the scores, where a bool mask becomes Where/IsNaN guards over every
        # (B, heads, T, T) score tensor, a fifth of onnxruntime's int8 time on ernie-3.0-mini.
        keep = attention_mask[:, None, None, :].to(dtype)
        mask = (1.0 - keep) * torch.finfo(dtype).min  # (B,1,1,T)
        return _Attention(mask=mask, key_padding=attention_mask if fused_attention_enabled() else None)
    return _Attention(mask=attention_mask[:, None, None, :].bool())  # (B,1,1,T) key padding


def _padding_offset_positions(input_ids: torch.Tensor, pad: int) -> torch.Tensor:
    """RoBERTa / XLM-R position ids: pad + 1 + the index among the row's non-pad tokens, and pad
    itself at padding (fairseq's `make_positions`, as transformers' XLMRobertaEmbeddings)."""
    keep = input_ids.ne(pad).long()  # (B, T)
    return torch.cumsum(keep, dim=1) * keep + pad


# ---------------------------------------------------------------------------------- blocks
class ErnieEmbeddings(nn.Module):
    """word + position + token-type (+ task-type) embeddings, LayerNorm, dropout."""

    def __init__(self, config: ErnieConfig, ops: TorchOps) -> None:
        super().__init__()
        h = config.hidden_size
        self.word = nn.Embedding(config.vocab_size, h, padding_idx=config.pad_token_id)
        self.position = nn.Embedding(config.max_position_embeddings, h)
        self.token_type = nn.Embedding(config.type_vocab_size, h)
        self.task_type = nn.Embedding(config.task_type_vocab_size, h) if config.use_task_id else None
        self.norm = nn.LayerNorm(h, eps=config.layer_norm_eps)
        self.dropout = config.hidden_dropout_prob
        self.ops = ops
        # XLM-R: positions count the row's non-pad tokens from pad_token_id + 1 on
        self.padding_positions = config.position_offset > 0

    def forward(self, input_ids, token_type_ids, task_type_ids, position_ids) -> torch.Tensor:
        T = input_ids.shape[1]
        x = self.word(input_ids)  # (B, T, H)
        if position_ids is None and self.padding_positions:
            position_ids = _padding_offset_positions(input_ids, self.word.padding_idx)
        # Default ids are all-zero / 0..T-1: add the rows directly instead of gathering.
        x = x + (self.position.weight[:T] if position_ids is None else self.position(position_ids))
        x = x + (self.token_type.weight[0] if token_type_ids is None else self.token_type(token_type_ids))
        if self.task_type is not None:
            x = x + (self.task_type.weight[0] if task_type_ids is None else self.task_type(task_type_ids))
        return self.ops.dropout(self.norm(x), self.dropout if self.training else 0.0)


class ErnieLayer(nn.Module):
    """Post-LN block: x = LN(x + Drop(Attn(x))); x = LN(x + Drop(FFN(x)))."""

    def __init__(self, config: ErnieConfig, ops: TorchOps) -> None:
        super().__init__()
        h, a = config.hidden_size, config.attention_size  # a < h after width pruning
        self.num_heads = config.num_attention_heads
        self.head_dim = config.head_dim
        self.qkv = nn.Linear(h, 3 * a)  # one matmul for q, k, v (rows: q; k; v)
        self.attn_out = nn.Linear(a, h)
        self.attn_norm = nn.LayerNorm(h, eps=config.layer_norm_eps)
        self.ffn_in = nn.Linear(h, config.intermediate_size)
        self.ffn_out = nn.Linear(config.intermediate_size, h)
        self.ffn_norm = nn.LayerNorm(h, eps=config.layer_norm_eps)
        self.act = _activation(config.hidden_act)
        self.hidden_dropout = config.hidden_dropout_prob
        self.attn_dropout = config.attention_probs_dropout_prob
        self.ops = ops  # the kernels: plain torch or the CPU fast paths (nlp.models.fast_paths)

    def forward(self, x: torch.Tensor, attn: _Attention, rows: Rows | None = None) -> torch.Tensor:
        """(B, T, H); with `rows`, only the outputs at those positions, (N, H): the pooler's [CLS]
        tokens, which the fast kernels compute without the other tokens' queries and FFN. Inside
        the layer's own call either way, so that whatever wraps the layer (a sharding unit that
        gathers its weights, a hook) sees every use of it."""
        if rows is not None:
            return self.ops.layer_at_rows(self, x, attn, rows)
        p = self.hidden_dropout if self.training else 0.0
        x = self.attn_norm(self.ops.residual_linear(self.attend(x, attn), self.attn_out, x, p))  # x + Drop(W_o a)
        h = self.ops.linear_act(x, self.ffn_in, self.act)  # act(W_1 x), (B, T, 4H)
        return self.ffn_norm(self.ops.residual_linear(h, self.ffn_out, x, p))  # x + Drop(W_2 h)

    def attend(self, x: torch.Tensor, attn: _Attention) -> torch.Tensor:
        """Multi-head self-attention before the output projection, (B, T, A): A = heads x head
        size, the hidden size H unless the heads were pruned."""
        B, T = x.shape[:2]
        A = self.num_heads * self.head_dim
        p = self.attn_dropout if self.training else 0.0
        if attn.key_padding is not None:  # exporting: one onnxruntime Attention node
            return torch.ops.nlp.self_attention(x, self.qkv.weight, self.qkv.bias, attn.key_padding, self.num_heads)
        qkv = self.ops.linear(x, self.qkv.weight, self.qkv.bias)  # (B, T, 3H)
        if attn.indices is not None:  # packed rows, flash-attn varlen on CUDA
            qkv = qkv.reshape(B * T, 3, self.num_heads, self.head_dim)[attn.indices]  # (N, 3, nh, hd)
            q, k, v = qkv.unbind(1)
            ctx = _flash_varlen(q, k, v, attn.cu_seqlens, attn.cu_seqlens, attn.max_seqlen,
                                attn.max_seqlen, dropout_p=p, causal=False)  # (N, nh, hd)
            out = ctx.new_zeros(B * T, A)
            out[attn.indices] = ctx.reshape(-1, A)
            return out.view(B, T, A)
        q, k, v = qkv.view(B, T, 3, self.num_heads, self.head_dim).unbind(2)  # (B, T, nh, hd)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)  # (B, nh, T, hd)
        ctx = self.ops.attention(q, k, v, attn.mask, p)  # (B, nh, T, hd)
        return ctx.transpose(1, 2).reshape(B, T, A)


# ---------------------------------------------------------------------------------- models
class ErnieModel(PreTrainedEncoder):
    """The backbone: embeddings, encoder layers, pooler (dense + tanh on each sequence's [CLS])."""

    _HF_SUFFIX = "Model"

    def __init__(self, config: ErnieConfig, add_pooling_layer: bool = True) -> None:
        super().__init__(config)
        self.ops = select_ops()  # the kernels, chosen once: NLP_FAST_PATHS / NLP_ONEDNN_LINEAR
        self.embeddings = ErnieEmbeddings(config, self.ops)
        self.layers = nn.ModuleList(ErnieLayer(config, self.ops) for _ in range(config.num_hidden_layers))
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
        if T > c.max_sequence_length and position_ids is None:
            offset = (f" less the {c.position_offset} rows before its first position" if c.position_offset else "")
            raise DataError(
                f"sequence length {T} exceeds max_position_embeddings={c.max_position_embeddings}{offset}; "
                f"truncate the input (tokenizer truncation=True, max_length<={c.max_sequence_length})"
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
                position_ids: torch.Tensor | None = None, pack_ids: torch.Tensor | None = None) -> EncoderOutput:
        x, attn = self._embed(input_ids, attention_mask, token_type_ids, task_type_ids, position_ids, pack_ids)
        for layer in self.layers:
            x = self._run(layer, x, attn)
        pooled = None
        if self.pooler is not None:
            cls = _cls_rows(pack_ids, x.shape[0], x.device)
            pooled = torch.tanh(self.ops.linear(x[cls.batch, cls.position], self.pooler.weight,
                                                self.pooler.bias))  # (B, H) or (S, H)
        return EncoderOutput(last_hidden_state=x, pooler_output=pooled)

    def pooled_output(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                      token_type_ids: torch.Tensor | None = None, task_type_ids: torch.Tensor | None = None,
                      position_ids: torch.Tensor | None = None, pack_ids: torch.Tensor | None = None) -> torch.Tensor:
        """`forward(...).pooler_output` alone, (B, H) or (S, H) for S packed sequences: what
        sequence classification asks for. The last layer is asked for the [CLS] rows only
        (`ErnieLayer.forward(..., rows)`, through `ops.layer_at_rows`), which the fast kernels compute without the other tokens' queries,
        attention output and FFN; the result is forward's to float rounding."""
        if self.pooler is None:
            raise ValueError("pooled_output needs the pooler (ErnieModel(config, add_pooling_layer=True))")
        x, attn = self._embed(input_ids, attention_mask, token_type_ids, task_type_ids, position_ids, pack_ids)
        cls = _cls_rows(pack_ids, x.shape[0], x.device)
        if not len(self.layers):
            return torch.tanh(self.pooler(x[cls.batch, cls.position]))
        for layer in self.layers[:-1]:
            x = self._run(layer, x, attn)
        h = self._run(self.layers[-1], x, attn, cls)  # (B|S, H): the last layer at the [CLS] rows
        return torch.tanh(self.pooler(h))

    def _embed(self, input_ids, attention_mask, token_type_ids, task_type_ids, position_ids,
               pack_ids) -> tuple[torch.Tensor, _Attention]:
        """Checked inputs -> the embeddings (B, T, H) and the attention layout every layer uses."""
        self._check_inputs(input_ids, attention_mask, token_type_ids, task_type_ids, position_ids, pack_ids)
        if pack_ids is not None and position_ids is None:
            # packed rows restart positions per sequence, from the architecture's first position
            position_ids = _packing.position_ids(pack_ids) + self.config.position_offset
        x = self.embeddings(input_ids, token_type_ids, task_type_ids, position_ids)
        return x, _build_attention(attention_mask, pack_ids, x.device.type, x.dtype)

    def _run(self, fn, *args):
        if self.gradient_checkpointing and self.training and torch.is_grad_enabled():
            return checkpoint(fn, *args, use_reentrant=False)
        return fn(*args)

    def _backbone_key_map(self) -> dict[str, list[str]]:
        return _to_hf_keys(self.state_dict().keys())


class ErnieForMaskedLM(PreTrainedEncoder):
    """Backbone (no pooler) + MLM head: dense, activation, LayerNorm, decoder tied to the word
    embeddings, plus an output bias.

    `sparse_logits=True` (pretraining): given labels, only the labelled positions (~15% of the
    tokens) go through the head to the vocabulary, and `logits` is (N, V) for the N positions
    where `labels != -100`, in row-major order; the loss is the same. At small model sizes the
    full projection would cost more than the whole encoder. Without labels, or with
    `sparse_logits=False`, `logits` is (B, T, V). Parameters, names and checkpoints are the same
    either way; the attribute may be set after `from_pretrained`."""

    _HF_SUFFIX = "ForMaskedLM"
    _HEAD_KEYS = {
        "mlm_dense.weight": "cls.predictions.transform.dense.weight",
        "mlm_dense.bias": "cls.predictions.transform.dense.bias",
        "mlm_norm.weight": "cls.predictions.transform.LayerNorm.weight",
        "mlm_norm.bias": "cls.predictions.transform.LayerNorm.bias",
        "mlm_bias": "cls.predictions.bias",
    }
    # XLM-R's head is the same maths under RoBERTa's names (`lm_head`, with gelu).
    _XLMR_HEAD_KEYS = {
        "mlm_dense.weight": "lm_head.dense.weight",
        "mlm_dense.bias": "lm_head.dense.bias",
        "mlm_norm.weight": "lm_head.layer_norm.weight",
        "mlm_norm.bias": "lm_head.layer_norm.bias",
        "mlm_bias": "lm_head.bias",
    }

    def __init__(self, config: ErnieConfig, sparse_logits: bool = False) -> None:
        super().__init__(config)
        self.backbone = ErnieModel(config, add_pooling_layer=False)
        self.mlm_dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.mlm_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.mlm_bias = nn.Parameter(torch.zeros(config.vocab_size))
        self.act = _activation(config.hidden_act)
        self.sparse_logits = sparse_logits
        if config.model_type == "xlm-roberta":
            self._HEAD_KEYS = self._XLMR_HEAD_KEYS
        self.post_init()

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                token_type_ids: torch.Tensor | None = None, task_type_ids: torch.Tensor | None = None,
                position_ids: torch.Tensor | None = None, pack_ids: torch.Tensor | None = None,
                labels: torch.Tensor | None = None) -> MaskedLMOutput:
        if labels is not None and tuple(labels.shape) != tuple(input_ids.shape):
            raise DataError(f"labels has shape {tuple(labels.shape)}, input_ids {tuple(input_ids.shape)}")
        x = self.backbone(input_ids, attention_mask, token_type_ids, task_type_ids,
                          position_ids, pack_ids).last_hidden_state  # (B, T, H)
        if labels is not None and self.sparse_logits:
            return self._labelled_only(x, labels)
        logits = self.vocabulary_logits(x)
        loss = None
        if labels is not None:
            loss = F.cross_entropy(logits.view(-1, logits.shape[-1]), labels.reshape(-1), ignore_index=-100)
        return MaskedLMOutput(loss=loss, logits=logits)

    def vocabulary_logits(self, x: torch.Tensor) -> torch.Tensor:
        """The head over every position: hidden states (B, T, H) -> scores (B, T, V)."""
        ops = self.backbone.ops
        h = self.mlm_norm(self.act(ops.linear(x, self.mlm_dense.weight, self.mlm_dense.bias)))
        return ops.linear(h, self.backbone.embeddings.word.weight, self.mlm_bias)  # tied decoder

    def _labelled_only(self, x: torch.Tensor, labels: torch.Tensor) -> MaskedLMOutput:
        """The head at the labelled positions only. Plain `F.linear` here, as the pretraining runs
        so far used (their losses reproduce)."""
        where = labels.ne(-100)  # (B, T)
        h = self.mlm_norm(self.act(self.mlm_dense(x[where])))  # (N, H)
        logits = F.linear(h, self.backbone.embeddings.word.weight, self.mlm_bias)  # (N, V), tied decoder
        target = labels[where]
        loss = F.cross_entropy(logits, target) if target.numel() else logits.sum() * 0.0
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
