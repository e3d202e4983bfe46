"""Weight averaging ("model soup"): one model whose every weight is a weighted mean of the same
weight in models fine-tuned from one starting point.

    r = merge_models(["runs/ner-mixed", "runs/ner-msra"], [0.35, 0.65], "runs/ner-merged/model")

Two fine-tunes of one model on different data (both corpora, and one of them alone) usually sit
in one basin of the loss, and their average keeps most of what each learned (docs/training.md,
"Merging fine-tunes", measures it on the NER default). Models that did not start from one
checkpoint average into noise; nothing here can tell, so measure the result (`nlp evaluate`).

The sources must be one task's models with the same architecture, the same parameter names and
shapes and the same labels (ConfigError naming the first difference). The merged model takes
everything but the weights (config.json, tokenizer files, the task's own files) from the first
source, less a declared inference precision (nlp.models.precision: it was measured on other
weights); a tokenizer file that differs in another source is logged, as the merged model reads
the first one's. Weights are averaged in fp32 and stored as the first source stores its own
(fp32, fp16 or int8 rows). Integer buffers must be equal in all sources. The output directory is
written whole or not at all, and never over an existing one.
"""

from __future__ import annotations

import logging
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import torch

from nlp._common import ConfigError, atomic_directory, check_output_path, sha256_file
from nlp.models.precision import drop_declared_precision
from nlp.models.release import TOKENIZER_FILES, save_stored_as, weight_storage
from nlp.tasks.model_dirs import locate_model
from nlp.tokenizer import load_tokenizer

__all__ = ["MergeResult", "merge_models"]

logger = logging.getLogger(__name__)


@dataclass
class MergeResult:
    out: Path
    sources: list[Path]
    weights: list[float]
    tensors: int
    differing_tokenizer_files: list[str]


def _check_weights(weights: Sequence[float] | None, n: int) -> list[float]:
    if weights is None:
        return [1.0 / n] * n
    weights = [float(w) for w in weights]
    if len(weights) != n:
        raise ConfigError(f"--weights: {len(weights)} given for {n} models; give one weight per model, in order")
    if any(not math.isfinite(w) or w < 0 for w in weights):
        raise ConfigError(f"--weights {weights}: each weight must be a number >= 0")
    total = sum(weights)
    if abs(total - 1.0) > 1e-6:
        scaled = f" (e.g. {' '.join(f'{w / total:.3g}' for w in weights)})" if total > 0 else ""
        raise ConfigError(f"--weights {weights} sum to {total:g}; give weights that sum to 1{scaled}")
    return weights


def merge_models(sources: Sequence[str | os.PathLike], weights: Sequence[float] | None, out: str | os.PathLike,
                 *, task: str | None = None, names: Sequence[str] | None = None) -> MergeResult:
    """Write to `out` the weighted average of `sources` (runs or model directories); `weights`
    (one per source, >= 0, summing to 1; None: equal); `names`: how errors name the sources (the
    hub names a user gave for the directories they resolve to; default the paths). See the module
    docstring."""
    if len(sources) < 2:
        raise ConfigError(f"give two or more models to merge (got {len(sources)})")
    weights = _check_weights(weights, len(sources))
    out = check_output_path(out, "--out", directory=True, new=True)  # before any work
    where = [locate_model(s, task) for s in sources]
    shown = [str(n) for n in names] if names is not None else [str(w.model_dir) for w in where]
    first, first_name = where[0], shown[0]
    for w, name in zip(where[1:], shown[1:]):
        if w.spec.name != first.spec.name:
            raise ConfigError(f"{name} is a {w.spec.name} model and {first_name} a {first.spec.name} "
                              "one; merge models of one task")
    models = [w.spec.head.from_pretrained(w.model_dir) for w in where]
    base = models[0]
    states = [m.state_dict() for m in models]
    for shown_as, m, state in zip(shown[1:], models[1:], states[1:]):
        if m.config.id2label != base.config.id2label:
            raise ConfigError(f"{shown_as} has the labels {m.config.id2label} and {first_name} "
                              f"{base.config.id2label}; merge models with the same labels in the same order")
        if state.keys() != states[0].keys():
            missing = sorted(set(states[0]) ^ set(state))[:3]
            raise ConfigError(f"{shown_as} and {first_name} have different parameters ({', '.join(missing)} "
                              "...); merge models of one architecture")
        for name, tensor in state.items():
            if tensor.shape != states[0][name].shape:
                raise ConfigError(f"{name} is {tuple(tensor.shape)} in {shown_as} and "
                                  f"{tuple(states[0][name].shape)} in {first_name}; merge models of one size")
    merged = {}
    for name, tensor in states[0].items():
        if tensor.is_floating_point():
            merged[name] = sum(wt * s[name].float() for wt, s in zip(weights, states)).to(tensor.dtype)
        elif all(torch.equal(s[name], tensor) for s in states[1:]):
            merged[name] = tensor
        else:
            raise ConfigError(f"{name} (integers) differs between the models; merge models of one architecture")
    base.load_state_dict(merged)
    drop_declared_precision(base, "merged")
    differing = _differing_tokenizer_files([w.model_dir for w in where])
    if differing:
        logger.warning("the models' %s differ: the merged model reads the first model's (%s)",
                       ", ".join(differing), first.model_dir)
    storage = weight_storage(first.model_dir / "model.safetensors")
    with atomic_directory(out) as tmp:
        save_stored_as(base, tmp, storage)
        load_tokenizer(first.model_dir).save_pretrained(tmp)
        first.spec.copy_model_files(first.model_dir, tmp)
    return MergeResult(out=out, sources=[w.model_dir for w in where], weights=weights, tensors=len(merged),
                       differing_tokenizer_files=differing)


def _differing_tokenizer_files(dirs: list[Path]) -> list[str]:
    found = []
    for name in TOKENIZER_FILES:
        digests = {sha256_file(d / name) if (d / name).is_file() else None for d in dirs}
        if len(digests) > 1:
            found.append(name)
    return found
