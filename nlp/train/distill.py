"""Knowledge distillation: fine-tune a (smaller) student on a task's labels and on the outputs of
a fine-tuned teacher, by a recipe's `distill:` section (nlp.train.recipe.DistillSection).

    nlp finetune recipes/sentiment-reviews.yaml distill.teacher=runs/sentiment-reviews \\
        model.layer_map=[0,2,4] train.output_dir=runs/sentiment-student

What the student learns from, and how, is the task spec's answer (`TaskSpec.distill_targets`):
per output, a distribution ("softmax": KL(teacher || student) at a temperature over the last axis,
times temperature^2 as Hinton et al. 2015; class logits, NER tag emissions per token (a CRF head's
transitions are learned from the labels), QA start/end over the positions), per-label
probabilities ("sigmoid") or a regression ("mse": sentence embeddings). Positions of a sequence
axis that are padding are left out. Optionally the student's last-layer hidden states, through a
learned projection to the teacher's width, match the teacher's (MSE; TinyBERT's layer loss at the
last layer).

The teacher's outputs are computed once, in one pass over the training set before the first step
(eval mode, no dropout), and travel with each training example as extra features, so every epoch
reuses them; the collator pads them with the batch. A resumed run computes them again once (the
same numbers: the pass is deterministic). The hidden-state loss needs the teacher's hidden states,
too large to keep for a training set (examples x tokens x width), so with `hidden_weight > 0` the
teacher also runs on each batch.

The student being trained is wrapped with its losses (`DistillationModel`): the Trainer checkpoints
the wrapper (the projection included, so a resume is exact) and exports the student alone (its
`save_pretrained`). Nothing here knows a task by name.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from nlp._common import ConfigError
from nlp.models import PreTrainedEncoder
from nlp.tasks.model_dirs import locate_model
from nlp.tasks.spec import TaskSpec
from nlp.tokenizer import Tokenizer, load_tokenizer

__all__ = ["DistillationModel", "DistillCollator", "prepare_distillation", "teacher_outputs", "TEACHER_PREFIX"]

logger = logging.getLogger(__name__)

TEACHER_PREFIX = "teacher_"  # a training feature's cached teacher output `logits` is `teacher_logits`
_MASKED = -1e4  # a padded position's logit in a distribution over positions


@dataclass
class DistillCollator:
    """The task's collator for the training batches, plus the cached teacher outputs of each
    example (`teacher_*` keys), padded along their sequence axis to the batch's length."""

    base: Callable[[list[dict]], dict[str, torch.Tensor]]
    keys: tuple[str, ...]
    per_token: tuple[str, ...] = ()  # keys whose first axis is the sequence (cut to each example's length)

    def __call__(self, features: list[dict]) -> dict[str, torch.Tensor]:
        plain = [{k: v for k, v in f.items() if k not in self.keys} for f in features]
        batch = self.base(plain)
        length = batch["input_ids"].shape[-1]
        for key in self.keys:
            rows = [np.asarray(f[key], dtype=np.float32) for f in features]
            if key in self.per_token:
                rows = [_pad_rows(r, length) for r in rows]
            batch[key] = torch.from_numpy(np.stack(rows))
        return batch


def _pad_rows(row: np.ndarray, length: int) -> np.ndarray:
    """Pad the first axis (sequence) of one example's output to `length` with zeros."""
    out = np.zeros((length, *row.shape[1:]), dtype=np.float32)
    out[: min(length, row.shape[0])] = row[:length]
    return out


class DistillationModel(nn.Module):
    """The student with its distillation losses. In training, a batch that carries the teacher's
    outputs (`teacher_*`) gets `loss` = hard_weight * the student's own loss + soft_weight * the
    soft-target losses + hidden_weight * the hidden-state loss; in evaluation (no teacher keys)
    it is the student. Attributes it does not have (config, decode, save_pretrained, ...) are
    the student's, so the Trainer exports the student alone."""

    def __init__(self, student: PreTrainedEncoder, targets: Mapping[str, str], *, temperature: float,
                 soft_weight: float, hard_weight: float, hidden_weight: float = 0.0,
                 teacher: PreTrainedEncoder | None = None) -> None:
        super().__init__()
        self.student = student
        self.targets = dict(targets)
        self.temperature, self.soft_weight = float(temperature), float(soft_weight)
        self.hard_weight, self.hidden_weight = float(hard_weight), float(hidden_weight)
        # the teacher is not a submodule: neither trained, nor checkpointed, nor exported
        object.__setattr__(self, "_teacher", teacher)
        self.projection = None
        if hidden_weight > 0:
            if teacher is None:
                raise ValueError("hidden_weight > 0 needs the teacher model (its hidden states are not cached)")
            s, t = student.config.hidden_size, teacher.config.hidden_size
            self.projection = nn.Linear(s, t)  # learned; the identity's shape when the widths agree
            if s == t:
                with torch.no_grad():
                    self.projection.weight.copy_(torch.eye(s))
                    self.projection.bias.zero_()

    def __getattr__(self, name: str) -> Any:
        try:
            return super().__getattr__(name)
        except AttributeError:
            return getattr(self._modules["student"], name)

    def forward(self, **batch: Any) -> Any:
        cached = {k[len(TEACHER_PREFIX):]: batch.pop(k) for k in list(batch) if k.startswith(TEACHER_PREFIX)}
        if not cached and not (self.training and self.projection is not None):
            return self.student(**batch)
        hidden: dict[str, torch.Tensor] = {}
        with _last_layer_output(self.student, hidden, "student"):
            out = self.student(**batch)
        hard = out.loss if out.loss is not None else torch.zeros((), device=batch["input_ids"].device)
        loss = self.hard_weight * hard if self.hard_weight else torch.zeros_like(hard)
        mask = batch.get("attention_mask")
        if self.soft_weight:
            for name, kind in self.targets.items():
                if name not in cached:
                    raise ValueError(f"the batch carries no cached teacher output {TEACHER_PREFIX + name!r}")
                loss = loss + self.soft_weight * soft_loss(getattr(out, name), cached[name].to(hard.dtype), kind,
                                                           self.temperature, mask)
        if self.projection is not None and self.hidden_weight:
            teacher = self._teacher
            with torch.no_grad(), _last_layer_output(teacher, hidden, "teacher"):
                teacher.eval()
                teacher(**{k: v for k, v in batch.items() if k not in ("labels",)})
            loss = loss + self.hidden_weight * hidden_loss(self.projection(hidden["student"]), hidden["teacher"], mask)
        out.loss = loss
        return out


class _last_layer_output:
    """Records the output of the model's last encoder layer into `store[key]` while active."""

    def __init__(self, model: nn.Module, store: dict[str, torch.Tensor], key: str) -> None:
        self.layer = model._encoder_backbone().layers[-1]
        self.store, self.key, self.handle = store, key, None

    def __enter__(self) -> "_last_layer_output":
        def hook(module: nn.Module, args: Any, output: Any) -> None:
            self.store[self.key] = output[0] if isinstance(output, tuple) else output

        self.handle = self.layer.register_forward_hook(hook)
        return self

    def __exit__(self, *exc: Any) -> None:
        self.handle.remove()


def soft_loss(student: torch.Tensor, teacher: torch.Tensor, kind: str, temperature: float,
              mask: torch.Tensor | None) -> torch.Tensor:
    """The loss of the student's output against the teacher's, by `kind` (TaskSpec.distill_targets):
    "softmax" KL(teacher || student) at `temperature`, times temperature^2; "sigmoid" binary
    cross-entropy against the teacher's probabilities; "mse". A (B, T, ...) output is averaged over
    the real positions of `mask` (B, T); a (B, T) distribution over positions masks the padding."""
    student = student.float()
    teacher = teacher.float()
    if student.shape != teacher.shape:
        raise ValueError(f"the student's output has shape {tuple(student.shape)}, the teacher's cached one "
                         f"{tuple(teacher.shape)}: they must match (same task, labels and tokenizer)")
    if kind == "mse":
        return F.mse_loss(student, teacher)
    over_positions = mask is not None and student.dim() == 2 and student.shape == mask.shape
    if over_positions:  # QA: a distribution over the sequence; padding takes no probability
        keep = mask.bool()
        student = student.masked_fill(~keep, _MASKED)
        teacher = teacher.masked_fill(~keep, _MASKED)
    if kind == "sigmoid":
        per = F.binary_cross_entropy_with_logits(student / temperature, torch.sigmoid(teacher / temperature),
                                                 reduction="none") * temperature ** 2
        per = per.mean(-1)
    elif kind == "softmax":
        log_p = F.log_softmax(student / temperature, dim=-1)
        q = F.softmax(teacher / temperature, dim=-1)
        per = (q * (torch.log(q.clamp_min(1e-12)) - log_p)).sum(-1) * temperature ** 2
    else:
        raise ValueError(f"unknown distillation target kind {kind!r}; valid: softmax, sigmoid, mse")
    # per: (B,) or (B, T) for a per-token output
    if per.dim() == 2 and mask is not None and per.shape == mask.shape:
        weights = mask.to(per.dtype)
        return (per * weights).sum() / weights.sum().clamp_min(1.0)
    return per.mean()


def hidden_loss(student: torch.Tensor, teacher: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """MSE between (projected) student and teacher hidden states, over real tokens when the
    states are per token (B, T, H), else over every row (a [CLS]-rows last layer)."""
    if student.shape != teacher.shape:
        raise ValueError(f"hidden states differ in shape: student {tuple(student.shape)} (projected), teacher "
                         f"{tuple(teacher.shape)}")
    per = ((student.float() - teacher.float()) ** 2).mean(-1)
    if mask is not None and per.shape == mask.shape:
        w = mask.to(per.dtype)
        return (per * w).sum() / w.sum().clamp_min(1.0)
    return per.mean()


@torch.inference_mode()
def teacher_outputs(teacher: PreTrainedEncoder, features: Sequence[dict], collate: Callable,
                    names: Sequence[str], batch_size: int, per_token: Sequence[str] = (),
                    label_keys: Sequence[str] = ("labels",)) -> list[dict[str, np.ndarray]]:
    """The teacher's outputs `names` for each feature, in order; those in `per_token` (a
    sequence axis after the batch axis) cut to the feature's own length (padding them is the
    collator's business). One pass; `label_keys` (the spec's) are not fed to the teacher."""
    teacher.eval()
    # longest first, as evaluation batches (little padding: a review set padded to the longest
    # in random order runs ~2.5x the tokens); the outputs go back to the features' order
    order = sorted(range(len(features)), key=lambda i: -_feature_length(features[i]))
    out: list[dict[str, np.ndarray] | None] = [None] * len(features)
    for start in range(0, len(order), batch_size):
        idx = order[start:start + batch_size]
        chunk = [features[i] for i in idx]
        batch = collate(chunk)
        inputs = {k: v for k, v in batch.items() if torch.is_tensor(v) and k not in label_keys}
        result = teacher(**{k: v for k, v in inputs.items() if k in _forward_keys(teacher, inputs)})
        for j, (i, f) in enumerate(zip(idx, chunk)):
            row = {}
            for name in names:
                value = getattr(result, name)[j].float().cpu().numpy()
                row[name] = value[:len(f["input_ids"])] if name in per_token else value
            out[i] = row
    return out  # type: ignore[return-value]


def _feature_length(feature: Mapping[str, Any]) -> int:
    """A feature's length in tokens (the longest row of a grouped feature)."""
    ids = feature["input_ids"]
    return max((len(r) for r in ids), default=0) if ids and isinstance(ids[0], (list, tuple)) else len(ids)


def _forward_keys(model: nn.Module, inputs: Mapping[str, Any]) -> set[str]:
    import inspect

    params = inspect.signature(model.forward).parameters
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return set(inputs)
    return {k for k in inputs if k in params}


def _load_teacher(directory: str, spec: TaskSpec, student: PreTrainedEncoder, tokenizer: Tokenizer,
                  label_names: list[str] | None) -> PreTrainedEncoder:
    """The teacher's head model, checked against the student: same task, labels, vocabulary."""
    where = locate_model(directory)
    if where.spec.name != spec.name:
        raise ConfigError(f"distill.teacher {directory!r} holds a {where.spec.name} model; this recipe fine-tunes "
                          f"{spec.name}: give a teacher fine-tuned for {spec.name}")
    teacher = spec.head.from_pretrained(where.model_dir).eval()
    t_labels, s_labels = teacher.config.id2label, student.config.id2label
    if spec.has_label_set and label_names and dict(t_labels) != dict(s_labels):
        raise ConfigError(f"distill.teacher {directory!r} was trained with labels "
                          f"{[t_labels[i] for i in sorted(t_labels)]}, the student with {label_names}: the soft "
                          "targets would not line up; use a teacher trained on the same label set")
    t_tok = load_tokenizer(where.model_dir)
    if t_tok.get_vocab() != tokenizer.get_vocab():
        raise ConfigError(f"distill.teacher {directory!r} has another tokenizer ({t_tok.vocab_size} tokens) than the "
                          f"student ({tokenizer.vocab_size}); the cached outputs are per token of the student's "
                          "features: fine-tune the student with the teacher's tokenizer (tokenizer.name: "
                          f"{where.model_dir})")
    return teacher


@torch.no_grad()
def _check_shapes(student: PreTrainedEncoder, spec: TaskSpec, tokenizer: Tokenizer, features: list[dict],
                  cached: list[dict[str, np.ndarray]], per_token: Sequence[str]) -> None:
    """ConfigError before training when the student's outputs cannot be compared with the
    teacher's (a regression of vectors of another width: a narrower student's embeddings)."""
    was = student.training
    student.eval()
    try:
        batch = spec.collator(tokenizer)(features)
        out = student(**{k: v for k, v in batch.items() if k in _forward_keys(student, batch) and k != "labels"})
    finally:
        student.train(was)
    for name, row in cached[0].items():
        got = tuple(getattr(out, name).shape[1:])
        want = row.shape if name not in per_token else (got[0], *row.shape[1:])
        if got != tuple(want):
            raise ConfigError(f"distill: the student's {name} has shape {got} per example, the teacher's "
                              f"{tuple(want)}: a student of another width cannot learn {name} directly; give it "
                              f"the teacher's width (model.layer_map keeps the teacher's layers) or set "
                              "distill.soft_weight: 0 and learn from hidden states (distill.hidden_weight)")


def prepare_distillation(recipe: Any, spec: TaskSpec, student: PreTrainedEncoder, tokenizer: Tokenizer,
                         label_names: list[str] | None, train_features: list[dict],
                         collate: Callable) -> tuple[DistillationModel, list[dict], DistillCollator]:
    """(the model the Trainer trains, the training features with the teacher's cached outputs,
    their collator) for a recipe with a distill section."""
    d = recipe.distill
    teacher = _load_teacher(d.teacher, spec, student, tokenizer, label_names)
    # soft_weight 0: nothing of the teacher's outputs is learned, so nothing is cached
    targets = spec.distill_targets(student.config) if d.soft_weight > 0 else {}
    per_token = tuple(n for n in targets if spec.export_outputs.get(n, ())[1:2] == ("sequence",))
    logger.info("distillation: caching the teacher's %s on %d training examples", ", ".join(targets),
                len(train_features))
    cached = (teacher_outputs(teacher, train_features, spec.collator(tokenizer), list(targets), d.teacher_batch_size,
                              per_token, spec.label_keys) if targets else [{} for _ in train_features])
    features = [{**f, **{TEACHER_PREFIX + k: v for k, v in c.items()}} for f, c in zip(train_features, cached)]
    if targets:
        _check_shapes(student, spec, tokenizer, train_features[:2], cached[:2], per_token)
    model = DistillationModel(student, targets, temperature=d.temperature, soft_weight=d.soft_weight,
                              hard_weight=d.hard_weight, hidden_weight=d.hidden_weight,
                              teacher=teacher if d.hidden_weight > 0 else None)
    keys = tuple(TEACHER_PREFIX + k for k in targets)
    return model, features, DistillCollator(collate, keys, tuple(TEACHER_PREFIX + k for k in per_token))
