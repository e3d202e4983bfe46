"""The evaluation / prediction loop shared by `Trainer.evaluate` and `Trainer.predict`.

Predictions come back per example, in dataset order, whatever the number of processes: each
process runs its strided share, the pieces are gathered and put back in place. Per example (not
one concatenated array) because token-level tasks pad every batch to a different length; the
task's `compute_metrics` knows how to read its own rows (e.g. skip -100 labels).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import torch

from nlp.tasks.model_io import feature_length
from nlp.tokenizer.samplers import SequentialShardSampler

__all__ = ["EvalPrediction", "default_preprocess", "predict_loop"]


@dataclass
class EvalPrediction:
    """What `compute_metrics` receives.

    predictions[i]: the model's output row for example i of the dataset (a numpy array, or a
        tuple of arrays when `preprocess_logits` returns a tuple, e.g. QA start/end logits).
    label_ids[i]: the example's labels as a numpy array (a tuple with several label keys), or
        None when the batches carry no labels.
    """

    predictions: list[Any]
    label_ids: list[Any] | None


def default_preprocess(outputs: Any, batch: Mapping[str, torch.Tensor]) -> torch.Tensor:
    """Keep the logits; tasks may pass e.g. `lambda out, b: out.logits.argmax(-1)` to save memory."""
    return outputs.logits


def _example_lengths(dataset: Sequence[Any]) -> list[int] | None:
    """Token counts of tokenized examples; None for anything else (then dataset order is kept)."""
    lengths = []
    for example in dataset:
        ids = example.get("input_ids") if isinstance(example, Mapping) else None
        if ids is None:
            return None
        lengths.append(feature_length(example))
    return lengths


def _rows(value: Any) -> list[Any]:
    """Split a (B, ...) tensor, or a tuple of them, into B numpy rows."""
    if isinstance(value, (tuple, list)):
        cols = [_rows(v) for v in value]
        return list(zip(*cols))
    t = value.detach()
    if t.is_floating_point():
        t = t.float()  # bf16/fp16 have no numpy dtype
    return list(t.cpu().numpy())


def predict_loop(
    model: torch.nn.Module,
    dataset: Sequence[Any],
    collate_fn: Callable[[list[Any]], dict[str, torch.Tensor]],
    *,
    accelerator: Any | None = None,
    batch_size: int,
    preprocess: Callable[[Any, Mapping[str, torch.Tensor]], Any],
    label_keys: Sequence[str],
    num_workers: int = 0,
    equal_batches: bool = False,
) -> tuple[EvalPrediction, float | None]:
    """Run the model over `dataset`; return the predictions and the mean loss (None when the
    model gives none). Tokenized examples (mappings with `input_ids`) are batched longest first,
    so that a batch holds similar lengths (little padding); predictions come back in dataset order.

    `accelerator`: the run's (each process scores its share, the shares are gathered); None runs
    in this process alone, on the device of the model's parameters. `equal_batches`: every
    process runs as many forward passes as the process with the most batches (a sharded model's
    forward is a collective); the extra ones, on the dataset's first example, are discarded."""
    if accelerator is None:
        world, rank, device = 1, 0, next(model.parameters()).device
    else:
        world, rank, device = accelerator.num_processes, accelerator.process_index, accelerator.device
    sampler = SequentialShardSampler(len(dataset), batch_size, num_replicas=world, rank=rank,
                                     lengths=_example_lengths(dataset))
    loader = torch.utils.data.DataLoader(
        dataset,
        batch_sampler=sampler,
        collate_fn=collate_fn,
        num_workers=num_workers,
        # An explicit generator: iterating a DataLoader must not draw from the global RNG, or
        # an evaluation in the middle of training would change the dropout masks after it.
        generator=torch.Generator(),
    )
    index_batches = iter(sampler)
    items: list[tuple[int, Any, Any]] = []
    loss_sum = torch.zeros((), dtype=torch.float64, device=device)
    loss_count = torch.zeros((), dtype=torch.float64, device=device)
    was_training = model.training
    model.eval()
    try:
        with torch.inference_mode():
            for batch in loader:
                indices = next(index_batches)
                batch = {k: v.to(device) if torch.is_tensor(v) else v for k, v in batch.items()}
                outputs = model(**batch)
                loss = getattr(outputs, "loss", None)
                if loss is not None:
                    loss_sum += loss.double() * len(indices)
                    loss_count += len(indices)
                preds = _rows(preprocess(outputs, batch))
                present = [k for k in label_keys if k in batch]
                if present:
                    labels = _rows(tuple(batch[k] for k in present)) if len(present) > 1 else _rows(batch[present[0]])
                else:
                    labels = [None] * len(indices)
                if len(preds) != len(indices):
                    raise ValueError(
                        f"preprocess_logits returned {len(preds)} rows for a batch of {len(indices)} "
                        "examples; evaluation needs one row per example (do not pack eval batches)"
                    )
                items.extend(zip(indices, preds, labels))
            if equal_batches and world > 1:
                most = -(-len(range(0, len(dataset), world)) // batch_size)  # rank 0's share
                for _ in range(most - len(sampler)):
                    extra = collate_fn([dataset[0]])
                    model(**{k: v.to(device) if torch.is_tensor(v) else v for k, v in extra.items()})
    finally:
        model.train(was_training)
    if world > 1:
        gathered: list[Any] = [None] * world
        torch.distributed.all_gather_object(gathered, items)
        items = [x for part in gathered for x in part]
        loss_sum = accelerator.reduce(loss_sum, "sum")
        loss_count = accelerator.reduce(loss_count, "sum")
    items.sort(key=lambda x: x[0])
    labels_list = [x[2] for x in items]
    prediction = EvalPrediction(
        predictions=[x[1] for x in items],
        label_ids=None if all(lab is None for lab in labels_list) else labels_list,
    )
    mean_loss = float(loss_sum / loss_count) if loss_count.item() > 0 else None
    return prediction, mean_loss


