"""Width pruning: keep each encoder layer's most important attention heads and feed-forward
neurons, ranked on a task's labelled data, and save a normal (smaller) model directory
(docs/compress.md).

    result = prune_width("runs/sentiment-reviews", "runs/sentiment-narrow", heads=0.5, neurons=0.5)
    # then a short re-training, best with the unpruned model as teacher:
    #   nlp finetune RECIPE model.name=runs/sentiment-narrow distill.teacher=runs/sentiment-reviews

Importance is Michel et al. 2019 ("Are Sixteen Heads Really Better than One?"), the measure
PaddleNLP's `Trainer.compress` uses: put a gate of 1 on each head's output and on each neuron of
the feed-forward layer, and sum |dL/d gate| over batches of the task's own data and loss. Both
gates feed one linear, so no gate is needed in the model: a head's output enters the attention
output projection W_o through its columns, and dL/d gate_h = sum over those columns of
W_o * dL/dW_o; a neuron enters the second feed-forward linear W_2 through its column, likewise.
The model runs in eval mode (no dropout) with gradients on.

Every layer keeps the same number of heads and neurons (the most important of its own), so the
result is one config: `num_attention_heads` the heads kept, `intermediate_size` the neurons kept,
and `attention_head_size` the unchanged head size. That field (heads x head size below the
hidden size) is ours: nlp loads the directory, fine-tunes, distils and exports it to ONNX, but
transformers' BERT / ERNIE classes, which derive the head size from the hidden size, cannot
(transformers 5 dropped `prune_heads`). A directory pruned in its neurons only (`heads=1.0`) is
a plain transformers config. The kept head and neuron indices are written to
`width_pruning.json` beside the weights.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping

import torch

from nlp._common import ConfigError, DataError, atomic_directory, check_output_path
from nlp.models import PreTrainedEncoder
from nlp.models.precision import drop_declared_precision
from nlp.models.release import save_stored_as, weight_storage

__all__ = ["WidthImportance", "WidthPruneResult", "width_importance", "prune_model_width", "prune_width",
           "kept_count", "PRUNING_FILE"]

logger = logging.getLogger(__name__)

PRUNING_FILE = "width_pruning.json"  # what was kept, beside the pruned weights


@dataclass
class WidthImportance:
    """Summed |dL/d gate| per head, (layers, heads), and per feed-forward neuron, (layers, neurons)."""

    heads: torch.Tensor
    neurons: torch.Tensor
    batches: int
    examples: int


@dataclass
class WidthPruneResult:
    out: Path
    heads_before: int
    heads_after: int
    neurons_before: int
    neurons_after: int
    parameters_before: int
    parameters_after: int
    examples: int  # ranked on
    data: str


def width_importance(model: PreTrainedEncoder, batches: Iterable[Mapping[str, torch.Tensor]]) -> WidthImportance:
    """Head and neuron importance of `model` (a task head model whose forward returns `.loss`
    for the batches, which carry their labels) over `batches`. The model is left in eval mode
    with no gradients kept."""
    layers = model._encoder_backbone().layers
    if not len(layers):
        raise ConfigError("the model has no encoder layers to prune")
    nh, hd = layers[0].num_heads, layers[0].head_dim
    heads = torch.zeros(len(layers), nh, dtype=torch.float64)
    neurons = torch.zeros(len(layers), layers[0].ffn_out.weight.shape[1], dtype=torch.float64)
    was = {p: p.requires_grad for p in model.parameters()}
    model.eval()
    n_batches = n_examples = 0
    try:
        for p in model.parameters():
            p.requires_grad_(False)
        for layer in layers:  # only the gates' linears need gradients
            layer.attn_out.weight.requires_grad_(True)
            layer.ffn_out.weight.requires_grad_(True)
        for batch in batches:
            for layer in layers:
                layer.attn_out.weight.grad = layer.ffn_out.weight.grad = None
            with torch.enable_grad():
                loss = getattr(model(**batch), "loss", None)
                if loss is None:
                    raise ConfigError("the model computed no loss on the ranking batches: they need their labels "
                                      f"(keys given: {', '.join(sorted(batch))})")
                if not torch.isfinite(loss):
                    raise DataError(f"the loss on ranking batch {n_batches} is {float(loss)}: importance needs a "
                                    "finite loss (check the data and the model)")
                loss.backward()
            with torch.no_grad():
                for i, layer in enumerate(layers):
                    w, g = layer.attn_out.weight, layer.attn_out.weight.grad  # (H, heads x head size)
                    heads[i] += (w * g).sum(0).double().view(nh, hd).sum(-1).abs()
                    w, g = layer.ffn_out.weight, layer.ffn_out.weight.grad  # (H, neurons)
                    neurons[i] += (w * g).sum(0).double().abs()
            n_batches += 1
            n_examples += int(batch["input_ids"].shape[0])
    finally:
        for p, requires in was.items():
            p.requires_grad_(requires)
            p.grad = None
    if not n_batches:
        raise ConfigError("no batches to rank the heads and neurons on: give labelled data")
    return WidthImportance(heads=heads, neurons=neurons, batches=n_batches, examples=n_examples)


def _check_share(share: float, what: str) -> None:
    if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0 < share <= 1:
        raise ConfigError(f"the share of {what} to keep must be in (0, 1], got {share!r} (1 keeps them all)")


def kept_count(share: float, total: int, what: str) -> int:
    """How many of `total` a share in (0, 1] keeps (at least one)."""
    _check_share(share, what)
    return max(1, min(total, round(total * share)))


def _top(scores: torch.Tensor, k: int) -> torch.Tensor:
    """The indices of the k highest scores, in their original order (ties: the lower index)."""
    return torch.sort(scores, descending=True, stable=True).indices[:k].sort().values


def prune_model_width(model: PreTrainedEncoder, importance: WidthImportance, *, heads: float = 1.0,
                      neurons: float = 1.0) -> tuple[PreTrainedEncoder, dict[str, Any]]:
    """A copy of `model` keeping, in every layer, the share `heads` of its heads and `neurons` of
    its feed-forward neurons with the highest importance; and what was kept (per layer)."""
    layers = model._encoder_backbone().layers
    config = model.config
    nh, hd, n_in = config.num_attention_heads, config.head_dim, config.intermediate_size
    if tuple(importance.heads.shape) != (len(layers), nh) or tuple(importance.neurons.shape) != (len(layers), n_in):
        raise ValueError(f"importance of shape {tuple(importance.heads.shape)} / {tuple(importance.neurons.shape)} "
                         f"does not fit a model of {len(layers)} layers x {nh} heads / {n_in} neurons")
    k_heads, k_neurons = kept_count(heads, nh, "heads"), kept_count(neurons, n_in, "neurons")
    a = nh * hd
    prefix = {id(m): name for name, m in model.named_modules()}
    state = dict(model.state_dict())
    kept: dict[str, list[list[int]]] = {"heads": [], "neurons": []}
    for i, layer in enumerate(layers):
        p = prefix[id(layer)] + "."
        h_idx = _top(importance.heads[i], k_heads)
        n_idx = _top(importance.neurons[i], k_neurons)
        cols = (h_idx[:, None] * hd + torch.arange(hd)).reshape(-1)  # the kept heads' columns
        rows = torch.cat([part * a + cols for part in range(3)])  # their q, k and v rows
        state[p + "qkv.weight"] = state[p + "qkv.weight"].index_select(0, rows)
        state[p + "qkv.bias"] = state[p + "qkv.bias"].index_select(0, rows)
        state[p + "attn_out.weight"] = state[p + "attn_out.weight"].index_select(1, cols)
        state[p + "ffn_in.weight"] = state[p + "ffn_in.weight"].index_select(0, n_idx)
        state[p + "ffn_in.bias"] = state[p + "ffn_in.bias"].index_select(0, n_idx)
        state[p + "ffn_out.weight"] = state[p + "ffn_out.weight"].index_select(1, n_idx)
        kept["heads"].append(h_idx.tolist())
        kept["neurons"].append(n_idx.tolist())
    changes: dict[str, Any] = {"num_attention_heads": k_heads, "intermediate_size": k_neurons}
    if k_heads != nh or config.attention_head_size is not None:
        changes["attention_head_size"] = hd
    pruned = type(model)(config.replace(**changes))
    pruned.load_state_dict({k: v.contiguous() for k, v in state.items()})
    return pruned.to(next(model.parameters()).dtype), kept


def _ranking_batches(scoring: Any, size: int, batch_size: int, seed: int) -> tuple[list[dict], int]:
    """Collated batches of `size` features of the scoring split drawn by a seeded shuffle."""
    import numpy as np

    features = scoring.features
    if not features:
        raise ConfigError(f"the {scoring.split} split of {scoring.data} gave no features to rank on")
    order = np.random.default_rng(seed).permutation(len(features))[:size]
    chosen = [features[i] for i in sorted(order.tolist())]
    collate = scoring.spec.collator(scoring.tokenizer)
    return [collate(chosen[s:s + batch_size]) for s in range(0, len(chosen), batch_size)], len(chosen)


def prune_width(source: str | os.PathLike, out: str | os.PathLike, *, heads: float = 1.0, neurons: float = 1.0,
                data: str = "dev", split: str = "dev", examples: int = 512, batch_size: int = 32, seed: int = 0,
                task: str | None = None) -> WidthPruneResult:
    """Rank the heads and neurons of `source` (a fine-tuned run or model directory) on `examples`
    of `data` (the run's own dev split by default; a dataset name with `split`, or a labelled
    file) and write the pruned model, its tokenizer and `width_pruning.json` to `out`, which
    must not exist."""
    from nlp.train.scoring import scoring_split

    out = check_output_path(out, "--out", directory=True, new=True)  # before any work
    _check_share(heads, "heads")  # refused before any work
    _check_share(neurons, "neurons")
    if heads == 1 and neurons == 1:
        raise ConfigError("--heads 1 and --neurons 1 keep every head and neuron: nothing to prune; give the share "
                          "to keep, e.g. --heads 0.5 --neurons 0.5")
    for name, value in (("--examples", examples), ("--batch-size", batch_size)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigError(f"{name} {value!r}: give a positive number")
    scoring, model = scoring_split(source, data, split=split, task=task)
    batches, n = _ranking_batches(scoring, examples, batch_size, seed)
    logger.info("ranking heads and neurons on %d examples of %s %s", n, scoring.data, scoring.split)
    importance = width_importance(model, batches)
    pruned, kept = prune_model_width(model, importance, heads=heads, neurons=neurons)
    drop_declared_precision(pruned, "pruned")
    storage = weight_storage(scoring.model_dir / "model.safetensors")  # int8 rows stay int8 rows, fp16 fp16
    record = {"source": str(source), "data": f"{scoring.data} {scoring.split}", "examples": n, "seed": seed,
              "importance": "sum over batches of |dL/dgate| (Michel et al. 2019)",
              "heads_before": model.config.num_attention_heads, "heads_after": pruned.config.num_attention_heads,
              "neurons_before": model.config.intermediate_size, "neurons_after": pruned.config.intermediate_size,
              "kept_heads": kept["heads"], "kept_neurons": kept["neurons"]}
    with atomic_directory(out) as tmp:
        save_stored_as(pruned, tmp, storage)
        scoring.tokenizer.save_pretrained(tmp)
        scoring.spec.copy_model_files(scoring.model_dir, tmp)  # the task's own files (a lexical model's lexicon)
        (tmp / PRUNING_FILE).write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    count = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731
    return WidthPruneResult(out=out, heads_before=record["heads_before"], heads_after=record["heads_after"],
                            neurons_before=record["neurons_before"], neurons_after=record["neurons_after"],
                            parameters_before=count(model), parameters_after=count(pruned), examples=n,
                            data=record["data"])
