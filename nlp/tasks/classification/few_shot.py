"""Few-shot classification the SetFit way (Tunstall et al. 2022, "Efficient Few-Shot Learning
Without Prompts"; huggingface/setfit): k labelled examples per class train a classifier in
two steps on an embedding model's own sentence vectors:

1. contrastive fine-tuning of the encoder on pairs of the k examples: each example, once per
   iteration, with a random example of its class (target cosine 1) and one of another class
   (target 0), learnt by sentence-transformers' CosineSimilarityLoss (the squared error of the
   pair's cosine); optional label descriptions join their class as extra anchors;
2. a classification head fitted on the tuned encoder's vectors of the k examples: multinomial
   logistic regression, SetFit's default head (L2-regularised cross entropy, full-batch L-BFGS).

The result is an ordinary sequence classification model (`classifier_pooling: mean`, heads.py),
which the fine-tuning engine then trains on the k examples for `train.epochs` (the encoder
frozen unless `end_to_end`: SetFit's differentiable head), evaluates and saves, and which every
layer runs (evaluate, predict, export, serve).

    task:
      name: text-classification
      few_shot: {k: 16, seed: 0, num_iterations: 20}

Sampling, pairs and both steps are deterministic given `seed`.
"""

from __future__ import annotations

import logging
import math
import random
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from nlp._common import DataError
from nlp._settings import Problem, Settings

__all__ = ["FewShotSettings", "sample_per_class", "make_pairs", "tune_encoder", "fit_head", "prepare_few_shot"]

logger = logging.getLogger(__name__)


@dataclass
class FewShotSettings(Settings):
    """The `task.few_shot` section of a classification recipe."""

    k: int = 16  # examples per class drawn from the train split (a class with fewer keeps all it has)
    seed: int = 0  # the draw, the pairs, and both training steps
    # pairs per example per iteration: one positive, one negative (SetFit's num_iterations: 20).
    # More tunes the encoder longer on the same k examples
    num_iterations: int = 20
    pair_epochs: int = 1  # passes over the pairs
    pair_batch_size: int = 16  # pairs per step
    pair_lr: float = 2e-5  # the encoder's learning rate in step 1 (SetFit's body_learning_rate)
    warmup_ratio: float = 0.1  # of step 1's steps, linear warm-up then linear decay
    head_c: float = 1.0  # inverse L2 strength of the logistic-regression head (scikit-learn's C)
    end_to_end: bool = False  # let the engine's epochs train the encoder with the head (else only the head)
    # label -> a description of it ("positive": "这是一条正面的新闻"): an extra anchor of its class in
    # the pairs (never a training example of the head)
    label_descriptions: dict[str, str] = field(default_factory=dict)

    def problems(self) -> list[Problem]:
        out = [Problem(name, f"{name} must be >= 1, got {getattr(self, name)}")
               for name in ("k", "num_iterations", "pair_epochs", "pair_batch_size") if getattr(self, name) < 1]
        out += [Problem(name, f"{name} must be > 0, got {getattr(self, name)}")
                for name in ("pair_lr", "head_c") if not getattr(self, name) > 0]
        if not 0 <= self.warmup_ratio < 1:
            out.append(Problem("warmup_ratio", f"warmup_ratio must be in [0, 1), got {self.warmup_ratio}"))
        return out


def sample_per_class(labels: Sequence[int], k: int, seed: int) -> list[int]:
    """Indices of `k` rows per class (all of a class with fewer), drawn without replacement by
    `seed`, in the split's order: the same split, k and seed give the same rows."""
    rng = np.random.default_rng(seed)
    labels = np.asarray(labels)
    chosen: list[int] = []
    for c in np.unique(labels):
        rows = np.flatnonzero(labels == c)
        if len(rows) < k:
            logger.warning("few_shot: class %s has %d training examples, fewer than k=%d; all are kept", c, len(rows), k)
        chosen.extend(rng.choice(rows, size=min(k, len(rows)), replace=False).tolist())
    return sorted(chosen)


def make_pairs(labels: Sequence[int], num_iterations: int, seed: int) -> list[tuple[int, int, float]]:
    """(i, j, target) pairs, SetFit's generation: per iteration, each row i with a random row of
    its class (1.0; another row where the class has one) and a random row of another class (0.0).
    A single class has no negatives: DataError."""
    rng = random.Random(seed)
    by_class: dict[int, list[int]] = {}
    for i, c in enumerate(labels):
        by_class.setdefault(int(c), []).append(i)
    if len(by_class) < 2:
        raise DataError(f"few_shot needs two or more classes in the train split; it has {len(by_class)}")
    pairs = []
    for _ in range(num_iterations):
        for i, c in enumerate(labels):
            same = [j for j in by_class[int(c)] if j != i] or [i]
            other = [j for j in range(len(labels)) if labels[j] != c]
            pairs.append((i, rng.choice(same), 1.0))
            pairs.append((i, rng.choice(other), 0.0))
    rng.shuffle(pairs)
    return pairs


def _vectors(model: Any, collate: Callable, rows: Sequence[dict], device: Any) -> torch.Tensor:
    batch = {k: v.to(device) for k, v in collate([_inputs(r) for r in rows]).items()}
    return model.sentence_features(**batch)  # (B, H)


def _inputs(feature: dict) -> dict:
    return {k: v for k, v in feature.items() if k in ("input_ids", "attention_mask", "token_type_ids")}


def tune_encoder(model: Any, rows: Sequence[dict], pairs: Sequence[tuple[int, int, float]], collate: Callable,
                 settings: FewShotSettings, device: Any = "cpu") -> list[float]:
    """Step 1: the encoder (`model.backbone`) trained on `pairs` of `rows` (token features) by
    CosineSimilarityLoss, AdamW with linear warm-up and decay; returns the losses per step."""
    torch.manual_seed(settings.seed)
    params = [p for p in model.backbone.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=settings.pair_lr)
    steps = settings.pair_epochs * math.ceil(len(pairs) / settings.pair_batch_size)
    warmup = int(steps * settings.warmup_ratio)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: (s + 1) / max(1, warmup) if s < warmup else max(0.0, (steps - s) / max(1, steps - warmup)))
    model.train()
    losses = []
    for epoch in range(settings.pair_epochs):
        order = pairs if epoch == 0 else random.Random(settings.seed + epoch).sample(list(pairs), len(pairs))
        for start in range(0, len(order), settings.pair_batch_size):
            chunk = order[start:start + settings.pair_batch_size]
            a = _vectors(model, collate, [rows[i] for i, _, _ in chunk], device)
            b = _vectors(model, collate, [rows[j] for _, j, _ in chunk], device)
            target = torch.tensor([t for _, _, t in chunk], dtype=a.dtype, device=a.device)
            loss = F.mse_loss(F.cosine_similarity(a, b), target)  # CosineSimilarityLoss
            opt.zero_grad()
            loss.backward()
            opt.step()
            schedule.step()
            losses.append(loss.item())
    model.eval()
    return losses


@torch.no_grad()
def encode(model: Any, rows: Sequence[dict], collate: Callable, device: Any = "cpu", batch_size: int = 32) -> torch.Tensor:
    """(N, H) the classifier's input vectors of `rows`, in eval mode."""
    model.eval()
    return torch.cat([_vectors(model, collate, rows[s:s + batch_size], device)
                      for s in range(0, len(rows), batch_size)]).float()


def fit_head(classifier: torch.nn.Linear, x: torch.Tensor, y: torch.Tensor, c: float) -> float:
    """Step 2: `classifier` set to the multinomial logistic regression of `y` on `x`, minimising
    scikit-learn's objective sum(CE) + ||W||^2 / (2C) (the bias unpenalised) with L-BFGS;
    returns the mean cross entropy on (x, y)."""
    n_labels, hidden = classifier.weight.shape
    w = torch.zeros(n_labels, hidden + 1, dtype=torch.float64, requires_grad=True)
    x1 = torch.cat([x.double(), torch.ones(len(x), 1, dtype=torch.float64)], dim=1)
    opt = torch.optim.LBFGS([w], lr=1.0, max_iter=500, tolerance_grad=1e-7, line_search_fn="strong_wolfe")

    def objective():
        opt.zero_grad()
        loss = F.cross_entropy(x1 @ w.T, y, reduction="sum") + (w[:, :-1] ** 2).sum() / (2 * c)
        loss.backward()
        return loss

    opt.step(objective)
    with torch.no_grad():
        classifier.weight.copy_(w[:, :-1].to(classifier.weight.dtype))
        classifier.bias.copy_(w[:, -1].to(classifier.bias.dtype))
        return float(F.cross_entropy(x1 @ w.T, y))


def prepare_few_shot(model: Any, features: Sequence[dict], collate: Callable, settings: FewShotSettings,
                     label_names: Sequence[str], anchors: Sequence[dict] = (), device: Any = "cpu") -> dict[str, float]:
    """Steps 1 and 2 on `model` (an ErnieForSequenceClassification with mean pooling) from the
    sampled training `features` (token features with `labels`) and the label descriptions'
    `anchors` (features with `labels`, pairs only); then the encoder is frozen unless
    `end_to_end`. Returns what happened, for the log."""
    rows = [*features, *anchors]
    labels = [int(r["labels"]) for r in rows]
    pairs = make_pairs(labels, settings.num_iterations, settings.seed)
    losses = tune_encoder(model, rows, pairs, collate, settings, device)
    y = torch.tensor([int(f["labels"]) for f in features])
    head_loss = fit_head(model.classifier, encode(model, features, collate, device), y, settings.head_c)
    if not settings.end_to_end:
        for p in model.backbone.parameters():
            p.requires_grad_(False)
    summary = {"examples": len(features), "anchors": len(anchors), "pairs": len(pairs),
               "pair_loss_first": losses[0], "pair_loss_last": float(np.mean(losses[-10:])),
               "head_train_loss": head_loss}
    logger.info("few_shot: %d examples of %d classes (+%d anchors), %d pairs: pair loss %.4f -> %.4f; head "
                "fitted (train cross entropy %.4f)%s", len(features), len(label_names), len(anchors), len(pairs),
                losses[0], summary["pair_loss_last"], head_loss, "" if settings.end_to_end else "; encoder frozen")
    return summary
