"""The calibration set of a static int8 export (`nlp export --quantize int8-static`), and the
score of the quantized model on the examples it was not calibrated on.

    cal = calibration_split("runs/sentiment-reviews", "dev", size=300)   # the run's dev split
    export_model("runs/sentiment-reviews", "export/s8", quantize="int8-static", calibration=cal)
    # the export calls cal.score(backend): the metric of the quantized model and of PyTorch on the
    # rest of the dev split, and how often their predictions agree (kept in its manifest)

The examples are drawn from the split by a seeded shuffle (the same `seed`, the same set), and
featurized as `nlp evaluate` featurizes the split (the run's max_length and task settings), so
the activation ranges are those of the data the model will see. A task whose features are groups
of sequences (batch, choices, sequence) calibrates on their rows. The trainer is not imported
by nlp.deploy: this object is what the CLI hands to the export.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from nlp._common import ConfigError
from nlp.tasks.backend import Backend, BackendModule
from nlp.train.evaluation import predict_loop
from nlp.train.finetune import TaskMetrics
from nlp.train.scoring import ScoringSplit, scoring_split

__all__ = ["CalibrationSplit", "calibration_split", "DEFAULT_CALIBRATION_SIZE"]

DEFAULT_CALIBRATION_SIZE = 300  # examples: min/max ranges settle well before (docs/compress.md)


@dataclass
class CalibrationSplit:
    """Calibration batches (model inputs only) and the held-out rest of the split."""

    batches: list[dict[str, np.ndarray]]
    source: str  # what the batches were drawn from, for the manifest
    examples: int  # calibration examples
    held_out: int  # examples left to score
    scoring: ScoringSplit
    held_examples: Any
    held_features: list[dict]
    _reference: dict[str, Any] | None = field(default=None, repr=False)

    def score(self, backend: Backend) -> dict[str, Any]:
        """The task metrics of `backend` (the quantized export) and of the PyTorch model on the
        held-out examples, and the share of predictions (argmax per row, per token for NER, start
        and end for QA) on which the two agree."""
        sc = self.scoring
        if self._reference is None:
            torch_net = sc.spec.head.from_pretrained(sc.model_dir).eval()
            self._reference = {"scores": sc.score(torch_net, self.held_examples, self.held_features),
                               "predictions": self._predict(torch_net)}
        net = BackendModule(backend)
        scores = sc.score(net, self.held_examples, self.held_features)
        agree = _agreement(self._reference["predictions"], self._predict(net))
        reference = {k: v for k, v in self._reference["scores"].items() if k != "loss"}
        return {"data": f"{sc.data} {sc.split}", "examples": self.held_out, "label_agreement": agree,
                "metrics": {k: v for k, v in scores.items() if k != "loss"}, "pytorch_metrics": reference}

    def _predict(self, net: torch.nn.Module) -> tuple[list[Any], list[Any]]:
        sc = self.scoring
        metrics = TaskMetrics(sc.spec, sc.labels, net, sc.recipe)
        pred, _ = predict_loop(net, self.held_features, sc.spec.collator(sc.tokenizer), batch_size=sc.batch_size,
                               preprocess=metrics.preprocess_logits, label_keys=sc.spec.label_keys)
        return list(pred.predictions), list(pred.label_ids) if pred.label_ids is not None else []


def _rows(x: Any) -> list[np.ndarray]:
    if isinstance(x, tuple):  # several outputs (QA start, end): each one row
        return [np.asarray(v) for v in x]
    return [np.asarray(x)]


def _agreement(a: tuple[list[Any], list[Any]], b: tuple[list[Any], list[Any]]) -> float:
    """Share of equal predicted labels: argmax of float rows, the values of integer rows (decoded
    tags); positions whose label is -100 (padding, sub-word continuations) are not counted."""
    (pa, labels), (pb, _) = a, b
    agree = total = 0
    for i, (ra, rb) in enumerate(zip(pa, pb)):
        for xa, xb in zip(_rows(ra), _rows(rb)):
            ya = xa.argmax(-1) if xa.dtype.kind == "f" and xa.ndim >= 1 else xa
            yb = xb.argmax(-1) if xb.dtype.kind == "f" and xb.ndim >= 1 else xb
            keep = np.ones(np.shape(ya), dtype=bool)
            label = np.asarray(labels[i]) if i < len(labels) and labels[i] is not None else None
            if label is not None and label.shape == np.shape(ya):
                keep = label != -100
            agree += int((np.asarray(ya) == np.asarray(yb))[keep].sum())
            total += int(keep.sum())
    return agree / max(1, total)


def _input_batches(scoring: ScoringSplit, features: list[dict], batch_size: int) -> list[dict[str, np.ndarray]]:
    """Collated batches of `features` holding only the export's inputs, as int64 numpy; groups
    of sequences (one axis more than the export's inputs take) as rows."""
    spec = scoring.spec
    axes = spec.export_axes()
    collate = spec.collator(scoring.tokenizer)
    out = []
    for start in range(0, len(features), batch_size):
        batch = collate(features[start:start + batch_size])
        arrays = {}
        for name in spec.export_inputs:
            if name not in batch:
                continue
            a = batch[name].cpu().numpy() if torch.is_tensor(batch[name]) else np.asarray(batch[name])
            if a.ndim == len(axes[name]) + 1:
                a = a.reshape(-1, a.shape[-1])
            arrays[name] = a.astype(np.int64)
        out.append(arrays)
    return out


def calibration_split(model: str | Path, data: str = "dev", *, split: str = "dev",
                      size: int = DEFAULT_CALIBRATION_SIZE, seed: int = 0, batch_size: int = 32,
                      task: str | None = None) -> CalibrationSplit:
    """`size` examples of `data` (a split name of the run's own data such as "dev", a dataset
    name with `split`, or a labelled file) to calibrate on, and the rest to score. ConfigError
    when the split is too small to leave examples to score, or `size` is not a positive count."""
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise ConfigError(f"--calibration-size {size!r}: give a positive number of examples "
                          f"(default {DEFAULT_CALIBRATION_SIZE})")
    try:
        scoring, _ = scoring_split(model, data, split=split, task=task)
    except ConfigError as err:  # its messages speak of --data / --split, nlp evaluate's options
        text = str(err).replace("--data", "--calibration").replace("--split", "--calibration-split")
        raise ConfigError(text) from None
    n = len(scoring.examples)
    if n < 2 or size >= n:
        raise ConfigError(f"--calibration-size {size}: the {scoring.split} split of {scoring.data} has {n} "
                          f"example(s); calibrate on fewer (e.g. --calibration-size {max(1, n // 2)}) so that "
                          "some are left to score the quantized model on, or give a larger --calibration DATA")
    order = np.random.default_rng(seed).permutation(n)
    cal_idx, rest_idx = sorted(order[:size].tolist()), sorted(order[size:].tolist())
    cal_examples, held = scoring.examples.select(cal_idx), scoring.examples.select(rest_idx)
    cal_features, held_features = scoring.featurize(cal_examples), scoring.featurize(held)
    if not cal_features:
        raise ConfigError(f"--calibration {data}: the {size} examples drawn gave no features to calibrate on")
    batches = _input_batches(scoring, cal_features, batch_size)
    source = f"{scoring.data} {scoring.split}: {size} of {n} examples (seed {seed})"
    return CalibrationSplit(batches=batches, source=source, examples=size, held_out=len(rest_idx),
                            scoring=scoring, held_examples=held, held_features=held_features)
