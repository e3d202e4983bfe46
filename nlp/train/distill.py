"""Knowledge distillation: fine-tune a (smaller) student on a task's labels and on the outputs of
a fine-tuned teacher, by a recipe's `distill:` section (nlp.train.recipe.DistillSection).

    nlp finetune recipes/sentiment-reviews.yaml distill.teacher=runs/sentiment-reviews \\
        model.layer_map=[0,2,4] train.output_dir=runs/sentiment-student

What the student learns from, and how, is the task spec's answer (`TaskSpec.distill_targets`):
per output, a distribution ("softmax": KL(teacher || student) at a temperature over the last axis,
times temperature^2 as Hinton et al. 2015; class logits, NER tag emissions per token (a CRF head's
transitions are learned from the labels), QA start/end over the positions), per-label
probabilities ("sigmoid") or a regression ("mse": sentence embeddings). Positions of a sequence
axis that are padding are left out. Optionally, from inside the two encoders
(nlp/train/distill_losses.py):
- hidden states: student layer i's output, through a learned projection per pair of layers (to
  the teacher's width), matches teacher layer j's (MSE; TinyBERT's layer loss), for the pairs of
  `layer_pairs` (default: the last layer to the last);
- self-attention relations (MiniLM v2): the query-query, key-key and value-value relations of a
  student layer against a teacher layer's, split into `relation_heads` relation heads, so widths
  and head counts may differ. Q, K and V are the layer's fused `qkv` projection of the layer's
  input, read by a forward hook (the models are not changed for it).

The teacher's outputs are computed once, in one pass over the training set before the first step
(eval mode, no dropout), and travel with each training example as extra features, so every epoch
reuses them; the collator pads them with the batch. A resumed run computes them again once (the
same numbers: the pass is deterministic). Hidden states and relations of a whole training set
(examples x tokens x width) are too large to keep, so with `hidden_weight` or `relation_weight`
> 0 the teacher also runs on each batch (up to the deepest teacher layer asked for).

Sentence embeddings can also learn the teacher's ranking (`ranking_weight`): each query's
distribution over the batch's candidate texts, from the same cached vectors (distill_losses.py).

Augmented copies of the training examples (`augment:`, nlp/train/augment.py) are training
features too, flagged (`distill_augmented`); they learn the teacher's outputs (soft targets,
hidden states, relations) and never the labels: the hard loss is the original rows' alone.

The student being trained is wrapped with its losses (`DistillationModel`): the Trainer checkpoints
the wrapper (the projections included, so a resume is exact) and exports the student alone (its
`save_pretrained`). Nothing here knows a task by name.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from nlp._common import ConfigError
from nlp.models import PreTrainedEncoder
from nlp.tasks.model_dirs import locate_model
from nlp.tasks.model_io import feature_length
from nlp.tasks.spec import TaskSpec
from nlp.tokenizer import Tokenizer, load_tokenizer
from nlp.train.distill_losses import RELATIONS, hidden_loss, in_batch_ranking_kl, relation_loss, soft_loss, split_qkv

__all__ = ["DistillationModel", "DistillCollator", "LayerPlan", "Ranking", "prepare_distillation", "teacher_outputs",
           "resolve_layers", "TEACHER_PREFIX", "AUGMENTED_KEY"]

logger = logging.getLogger(__name__)

TEACHER_PREFIX = "teacher_"  # a training feature's cached teacher output `logits` is `teacher_logits`
AUGMENTED_KEY = "distill_augmented"  # 1 on a training feature made by augmentation (no trusted labels)


@dataclass
class DistillCollator:
    """The task's collator for the training batches, plus the cached teacher outputs of each
    example (`teacher_*` keys), padded along their sequence axis to the batch's length, and the
    augmentation flag when there is one."""

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


# --------------------------------------------------------------------------- which layers


@dataclass(frozen=True)
class LayerPlan:
    """Which encoder layers the intermediate losses compare, as non-negative indices:
    `hidden` (student layer, teacher layer) pairs for the hidden-state MSE, `relation` the pair
    for MiniLM's relations (None: no relation loss), split into `relation_heads` heads."""

    hidden: tuple[tuple[int, int], ...] = ()
    relation: tuple[int, int] | None = None
    relation_heads: int = 1
    relations: tuple[str, ...] = RELATIONS


def _num_layers(model: nn.Module) -> int:
    return len(model._encoder_backbone().layers)


def _layer_index(i: int, n: int, who: str, key: str, given: Any) -> int:
    if not -n <= i < n:
        raise ConfigError(f"distill.{key}: {given} names {who} layer {i}, but the {who} has {n} layer"
                          f"{'s' if n != 1 else ''} (valid: 0..{n - 1}, or -{n}..-1 from the last)")
    return i % n


def resolve_layers(d: Any, student: nn.Module, teacher: nn.Module) -> LayerPlan:
    """The distill section's layer settings against the two models (ConfigError naming the
    setting for a layer a model lacks, or relation heads that do not divide a width)."""
    ns, nt = _num_layers(student), _num_layers(teacher)
    hidden: list[tuple[int, int]] = []
    if d.hidden_weight > 0:
        if d.layer_pairs == "last":
            pairs: list[Any] = [[-1, -1]]
        elif d.layer_pairs == "uniform":  # TinyBERT's g(m) = m * N / M, 1-based: every student layer
            if nt < ns:
                raise ConfigError(f"distill.layer_pairs: uniform maps the student's {ns} layers onto the teacher's "
                                  f"{nt}, which has fewer; list the pairs instead ([[student, teacher], ...])")
            pairs = [[i, (i + 1) * nt // ns - 1] for i in range(ns)]
        else:
            pairs = list(d.layer_pairs)
        hidden = [(_layer_index(s, ns, "student", "layer_pairs", [s, t]),
                   _layer_index(t, nt, "teacher", "layer_pairs", [s, t])) for s, t in pairs]
    relation = None
    heads = 1
    if d.relation_weight > 0:
        s, t = d.relation_layers
        relation = (_layer_index(s, ns, "student", "relation_layers", [s, t]),
                    _layer_index(t, nt, "teacher", "relation_layers", [s, t]))
        heads = d.relation_heads or teacher.config.num_attention_heads
        widths = {}
        for who, model, layer in (("student", student, relation[0]), ("teacher", teacher, relation[1])):
            qkv = getattr(model._encoder_backbone().layers[layer], "qkv", None)
            if not isinstance(qkv, nn.Linear):
                raise ConfigError(f"distill.relation_weight: the {who}'s layers have no fused qkv projection "
                                  f"({type(model._encoder_backbone().layers[layer]).__name__}) to read Q, K and V from")
            widths[who] = qkv.out_features // 3  # the attention width: hidden_size, less where heads were pruned
        for who, width in widths.items():
            if width % heads:
                source = "distill.relation_heads" if d.relation_heads else \
                    "distill.relation_heads (null: the teacher's num_attention_heads)"
                raise ConfigError(f"{source} is {heads}, which does not divide the {who}'s attention width {width}; "
                                  "give a number of relation heads that divides both widths "
                                  f"({widths['student']} and {widths['teacher']})")
    return LayerPlan(tuple(hidden), relation, heads, tuple(d.relations))


class _Enough(Exception):
    """Raised by a hook once the deepest layer a forward pass is run for has run."""


class _LayerTaps:
    """While active: the outputs of some encoder layers (`outputs[i]`: (B, T, H), or (N, H) at
    the [CLS] rows for a last layer asked for those only, with `rows[i]` the positions) and the
    inputs of others (`inputs[i]`, (B, T, H): what their q, k, v project). With `stop`, the
    forward pass ends (`_Enough`) after the deepest of those layers."""

    def __init__(self, model: nn.Module, outputs: Sequence[int], inputs: Sequence[int], stop: bool = False) -> None:
        self.layers = model._encoder_backbone().layers
        self.want_out, self.want_in = set(outputs), set(inputs)
        wanted = self.want_out | self.want_in
        self.last = max(wanted) if stop and wanted and max(wanted) < len(self.layers) - 1 else None
        self.outputs: dict[int, torch.Tensor] = {}
        self.rows: dict[int, Any] = {}
        self.inputs: dict[int, torch.Tensor] = {}
        self.handles: list[Any] = []

    def __enter__(self) -> "_LayerTaps":
        for i in sorted(self.want_out | self.want_in):
            self.handles.append(self.layers[i].register_forward_hook(self._hook(i)))
        return self

    def _hook(self, i: int) -> Callable:
        def hook(module: nn.Module, args: Any, output: Any) -> None:
            if i in self.want_in:
                self.inputs[i] = args[0]
            if i in self.want_out:
                self.outputs[i] = output[0] if isinstance(output, tuple) else output
                self.rows[i] = args[2] if len(args) > 2 else None
            if i == self.last:
                raise _Enough

        return hook

    def __exit__(self, *exc: Any) -> bool:
        for h in self.handles:
            h.remove()
        return exc[0] is _Enough  # the pass was cut short on purpose


def _qkv(model: nn.Module, layer: int, x: torch.Tensor) -> dict[str, torch.Tensor]:
    """The query, key and value vectors (B, T, H each) layer `layer` computes from its input x."""
    qkv = model._encoder_backbone().layers[layer].qkv
    return split_qkv(F.linear(x, qkv.weight, qkv.bias))


def _same_rows(s: torch.Tensor, s_rows: Any, t: torch.Tensor, t_rows: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """Student and teacher states of one pair, at the same positions: where one side's layer gave
    the [CLS] rows alone (a classifier's last layer, (N, H)), those rows of the other's (B, T, H)."""
    if s.dim() == t.dim():
        return s, t
    if s.dim() == 3:
        return s[t_rows.batch, t_rows.position], t
    return s, t[s_rows.batch, s_rows.position]


def _select(batch: Mapping[str, Any], keep: torch.Tensor) -> dict[str, Any]:
    """The rows `keep` (a (B,) bool mask) of every per-example tensor of a batch."""
    n = keep.shape[0]
    return {k: v[keep] if torch.is_tensor(v) and v.dim() and v.shape[0] == n else v for k, v in batch.items()}


# --------------------------------------------------------------------------- the model


@dataclass(frozen=True)
class Ranking:
    """`distill.ranking_weight`: the output (B, texts, width) whose in-batch ranking the student
    learns, its weight, and each model's temperature over cosines."""

    output: str
    weight: float
    student_temperature: float
    teacher_temperature: float


class DistillationModel(nn.Module):
    """The student with its distillation losses. In training, a batch that carries the teacher's
    outputs (`teacher_*`) gets `loss` = hard_weight * the student's own loss + soft_weight * the
    soft-target losses + hidden_weight * the hidden-state losses (summed over the layer pairs) +
    relation_weight * the relation loss + ranking_weight * the in-batch ranking loss (`Ranking`);
    rows flagged as augmented (`AUGMENTED_KEY`) have no hard loss (the loss is the mean over the
    batch's rows of each row's terms). In evaluation (no teacher keys) it is the student.
    Attributes it does not have (config, decoding_tensors, save_pretrained, ...) are the
    student's, so the Trainer exports the student alone."""

    def __init__(self, student: PreTrainedEncoder, targets: Mapping[str, str], *, temperature: float,
                 soft_weight: float, hard_weight: float, hidden_weight: float = 0.0, relation_weight: float = 0.0,
                 layers: LayerPlan | None = None, teacher: PreTrainedEncoder | None = None,
                 label_keys: Sequence[str] = ("labels",), ranking: Ranking | None = None) -> None:
        super().__init__()
        self.student = student
        self.targets = dict(targets)
        self.ranking = ranking
        self.temperature, self.soft_weight = float(temperature), float(soft_weight)
        self.hard_weight, self.hidden_weight = float(hard_weight), float(hidden_weight)
        self.relation_weight = float(relation_weight)
        self.label_keys = tuple(label_keys)
        if layers is None:  # the last layer to the last, as the hidden_weight of old
            last = (_num_layers(student) - 1, _num_layers(teacher) - 1) if teacher is not None else (0, 0)
            layers = LayerPlan(hidden=(last,) if hidden_weight > 0 else ())
        self.plan = layers
        self.teacher_runs = bool(hidden_weight > 0 and layers.hidden) or bool(relation_weight > 0 and layers.relation)
        if self.teacher_runs and teacher is None:
            raise ValueError("hidden_weight or relation_weight > 0 needs the teacher model (its states are not cached)")
        # the teacher is not a submodule: neither trained, nor checkpointed, nor saved in model/
        object.__setattr__(self, "_teacher", teacher)
        # one learned projection per hidden pair, student width -> teacher width (the identity's
        # shape and start when the widths agree)
        self.projections = nn.ModuleList()
        if hidden_weight > 0:
            s, t = student.config.hidden_size, teacher.config.hidden_size  # type: ignore[union-attr]
            for _ in layers.hidden:
                proj = nn.Linear(s, t)
                if s == t:
                    with torch.no_grad():
                        proj.weight.copy_(torch.eye(s))
                        proj.bias.zero_()
                self.projections.append(proj)

    def __getattr__(self, name: str) -> Any:
        try:
            return super().__getattr__(name)
        except AttributeError:
            return getattr(self._modules["student"], name)

    def forward(self, **batch: Any) -> Any:
        cached = {k[len(TEACHER_PREFIX):]: batch.pop(k) for k in list(batch) if k.startswith(TEACHER_PREFIX)}
        augmented = batch.pop(AUGMENTED_KEY, None)
        if not cached and not (self.training and self.teacher_runs):
            return self.student(**batch)
        copies = None if augmented is None else augmented.bool()
        if copies is None or not bool(copies.any()):
            return self._distil(batch, cached, hard=True)
        unlabelled = {k: v for k, v in batch.items() if k not in self.label_keys}
        if bool(copies.all()):
            return self._distil(unlabelled, cached, hard=False)
        # originals and augmented copies in one batch: two passes, so that only the originals'
        # labels are learned; each part weighs by its rows
        out = self._distil(_select(batch, ~copies), _select(cached, ~copies), hard=True)
        aug = self._distil(_select(unlabelled, copies), _select(cached, copies), hard=False)
        share = copies.float().mean()
        out.loss = (1 - share) * out.loss + share * aug.loss
        return out

    def _distil(self, batch: dict[str, Any], cached: Mapping[str, torch.Tensor], *, hard: bool) -> Any:
        plan = self.plan
        taps = _LayerTaps(self.student, [s for s, _ in plan.hidden] if self.hidden_weight else [],
                          [plan.relation[0]] if self.relation_weight and plan.relation else [])
        with taps:
            out = self.student(**batch)
        zero = torch.zeros((), device=batch["input_ids"].device)
        loss = self.hard_weight * out.loss if hard and self.hard_weight and out.loss is not None else zero
        mask = batch.get("attention_mask")
        if self.soft_weight:
            for name, kind in self.targets.items():
                if name not in cached:
                    raise ValueError(f"the batch carries no cached teacher output {TEACHER_PREFIX + name!r}")
                loss = loss + self.soft_weight * soft_loss(getattr(out, name), cached[name].float(), kind,
                                                           self.temperature, mask)
        r = self.ranking
        if r is not None and not any(k in batch for k in self.label_keys):  # retrieval records, not scored pairs
            loss = loss + r.weight * in_batch_ranking_kl(getattr(out, r.output), cached[r.output],
                                                         r.student_temperature, r.teacher_temperature)
        if self.teacher_runs:
            loss = loss + self._inner_losses(batch, taps, mask)
        out.loss = loss
        return out

    def _inner_losses(self, batch: Mapping[str, Any], student: _LayerTaps, mask: torch.Tensor | None) -> torch.Tensor:
        """hidden_weight * the hidden-state MSE of each pair + relation_weight * the relation loss."""
        plan, teacher = self.plan, self._teacher
        hidden = plan.hidden if self.hidden_weight else ()
        relation = plan.relation if self.relation_weight else None
        taps = _LayerTaps(teacher, [t for _, t in hidden], [relation[1]] if relation else [], stop=True)
        device = batch["input_ids"].device
        if next(teacher.parameters()).device != device:  # not a submodule: the Trainer moved the student alone
            teacher.to(device)
        teacher.eval()
        with torch.no_grad(), taps:
            teacher(**{k: v for k, v in batch.items() if k not in self.label_keys})
        loss = torch.zeros((), device=batch["input_ids"].device)
        for proj, (s, t) in zip(self.projections, hidden):
            got, want = _same_rows(student.outputs[s], student.rows[s], taps.outputs[t], taps.rows[t])
            loss = loss + self.hidden_weight * hidden_loss(proj(got), want, mask if got.dim() == 3 else None)
        if relation is not None:
            with torch.no_grad():
                want_qkv = _qkv(teacher, relation[1], taps.inputs[relation[1]])
            got_qkv = _qkv(self.student, relation[0], student.inputs[relation[0]])
            loss = loss + self.relation_weight * relation_loss(got_qkv, want_qkv, mask, plan.relation_heads,
                                                               plan.relations)
        return loss


@torch.inference_mode()
def teacher_outputs(teacher: PreTrainedEncoder, features: Sequence[dict], collate: Callable,
                    names: Sequence[str], batch_size: int, per_token: Sequence[str] = (),
                    label_keys: Sequence[str] = ("labels",)) -> list[dict[str, np.ndarray]]:
    """The teacher's outputs `names` for each feature, in order; those in `per_token` (a
    sequence axis after the batch axis) cut to the feature's own length (padding them is the
    collator's business). One pass; `label_keys` (the spec's) are not fed to the teacher."""
    teacher.eval()
    device = next(teacher.parameters()).device
    # longest first, as evaluation batches (little padding: a review set padded to the longest
    # in random order runs ~2.5x the tokens); the outputs go back to the features' order
    order = sorted(range(len(features)), key=lambda i: -feature_length(features[i]))
    out: list[dict[str, np.ndarray] | None] = [None] * len(features)
    for start in range(0, len(order), batch_size):
        idx = order[start:start + batch_size]
        chunk = [features[i] for i in idx]
        batch = collate(chunk)
        inputs = {k: v.to(device) for k, v in batch.items() if torch.is_tensor(v) and k not in label_keys}
        result = teacher(**{k: v for k, v in inputs.items() if k in _forward_keys(teacher, inputs)})
        for j, (i, f) in enumerate(zip(idx, chunk)):
            row = {}
            for name in names:
                value = getattr(result, name)[j].float().cpu().numpy()
                row[name] = value[:len(f["input_ids"])] if name in per_token else value
            out[i] = row
    return out  # type: ignore[return-value]


def _forward_keys(model: nn.Module, inputs: Mapping[str, Any]) -> set[str]:
    import inspect

    params = inspect.signature(model.forward).parameters
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return set(inputs)
    return {k for k in inputs if k in params}


def _load_teacher(teacher_name: str, spec: TaskSpec, student: PreTrainedEncoder, tokenizer: Tokenizer,
                  label_names: list[str] | None, directory: Callable[[str], Path] | None = None) -> PreTrainedEncoder:
    """The teacher's head model, checked against the student: same task, labels, vocabulary.
    `directory` makes `teacher_name` (a hub name, with the CLI's loaders) a local directory."""
    where = locate_model(directory(teacher_name) if directory is not None else teacher_name)
    if where.spec.name != spec.name:
        raise ConfigError(f"distill.teacher {teacher_name!r} holds a {where.spec.name} model; this recipe fine-tunes "
                          f"{spec.name}: give a teacher fine-tuned for {spec.name}")
    teacher = spec.head.from_pretrained(where.model_dir).eval()
    t_labels, s_labels = teacher.config.id2label, student.config.id2label
    if spec.has_label_set and label_names and dict(t_labels) != dict(s_labels):
        raise ConfigError(f"distill.teacher {teacher_name!r} was trained with labels "
                          f"{[t_labels[i] for i in sorted(t_labels)]}, the student with {label_names}: the soft "
                          "targets would not line up; use a teacher trained on the same label set")
    t_tok = load_tokenizer(where.model_dir)
    if t_tok.get_vocab() != tokenizer.get_vocab():
        raise ConfigError(f"distill.teacher {teacher_name!r} has another tokenizer ({t_tok.vocab_size} tokens) than "
                          f"the student ({tokenizer.vocab_size}); the cached outputs are per token of the student's "
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
                         label_names: list[str] | None, train_features: list[dict], collate: Callable, *,
                         train_examples: Any = None, featurize: Callable[[Any], list[dict]] | None = None,
                         device: torch.device | str = "cpu", directory: Callable[[str], Path] | None = None,
                         ) -> tuple[DistillationModel, list[dict], DistillCollator]:
    """(the model the Trainer trains, the training features with the teacher's cached outputs,
    their collator) for a recipe with a distill section. With `distill.augment`, the rewritten
    copies of `train_examples` (the training split, whose features `train_features` are), made
    features by `featurize`, follow the originals, flagged. The teacher runs on `device` (the
    device this process trains on); `directory` makes a teacher's name a local directory (the
    finetune loaders': a hub name with the CLI's)."""
    d = recipe.distill
    teacher = _load_teacher(d.teacher, spec, student, tokenizer, label_names, directory).to(device)
    plan = resolve_layers(d, student, teacher)  # a layer either model lacks: refused before any pass
    originals = len(train_features)
    if d.augment is not None:
        train_features = train_features + _augmented_features(recipe, spec, train_examples, featurize)
    ranking = _ranking(d, spec, student, teacher)
    # soft_weight 0: nothing of the teacher's outputs is learned, so nothing is cached (but the
    # vectors whose ranking is learned)
    targets = spec.distill_targets(student.config) if d.soft_weight > 0 else {}
    cached_names = list(targets) + ([ranking.output] if ranking and ranking.output not in targets else [])
    per_token = tuple(n for n in targets if spec.export_outputs.get(n, ())[1:2] == ("sequence",))
    logger.info("distillation: caching the teacher's %s on %d training examples", ", ".join(cached_names),
                len(train_features))
    teacher_inputs = spec.teacher_features(train_features, teacher.config, tokenizer) \
        if cached_names and d.teacher_prompts else train_features
    cached = (teacher_outputs(teacher, teacher_inputs, spec.collator(tokenizer), cached_names, d.teacher_batch_size,
                              per_token, spec.label_keys) if cached_names else [{} for _ in train_features])
    if targets:  # a ranking compares cosines, so a student of another width learns it too
        _check_shapes(student, spec, tokenizer, train_features[:2], [{k: c[k] for k in targets} for c in cached[:2]],
                      per_token)
    features = [{**f, **{TEACHER_PREFIX + k: v for k, v in c.items()}} for f, c in zip(train_features, cached)]
    keys: tuple[str, ...] = ()
    if d.augment is not None:  # flagged after the teacher's pass, which takes model inputs alone
        for i, f in enumerate(features):
            f[AUGMENTED_KEY] = int(i >= originals)
        keys = (AUGMENTED_KEY,)
    model = DistillationModel(student, targets, temperature=d.temperature, soft_weight=d.soft_weight,
                              hard_weight=d.hard_weight, hidden_weight=d.hidden_weight,
                              relation_weight=d.relation_weight, layers=plan, label_keys=spec.label_keys,
                              teacher=teacher if d.hidden_weight > 0 or d.relation_weight > 0 else None,
                              ranking=ranking)
    keys = tuple(TEACHER_PREFIX + k for k in cached_names) + keys
    return model, features, DistillCollator(collate, keys, tuple(TEACHER_PREFIX + k for k in per_token))


def _ranking(d: Any, spec: TaskSpec, student: PreTrainedEncoder, teacher: PreTrainedEncoder) -> Ranking | None:
    """The ranking loss of `distill.ranking_weight` (None at 0); ConfigError for a task without
    a ranked output."""
    if not d.ranking_weight > 0:
        return None
    ranked = spec.distill_ranking(student.config)
    if ranked is None:
        raise ConfigError(f"distill.ranking_weight: the {spec.name} task has no output whose ranking is learned (it "
                          "applies to sentence embeddings of retrieval records); set distill.ranking_weight: 0")
    output, student_temperature = ranked
    teacher_temperature = d.ranking_temperature if d.ranking_temperature is not None else \
        spec.distill_ranking(teacher.config)[1]
    return Ranking(output, float(d.ranking_weight), student_temperature, float(teacher_temperature))


def _augmented_features(recipe: Any, spec: TaskSpec, examples: Any, featurize: Callable | None) -> list[dict]:
    """The features of the rewritten copies of the training examples (nlp/train/augment.py)."""
    from nlp.train.augment import JiebaDictionary, MaskedLMChars, WordReplacer, augment_examples

    a = recipe.distill.augment
    if not spec.augment_columns:  # check_recipe refuses it first; library callers land here
        raise ConfigError(f"distill.augment: {spec.name} examples are not rewritten (its spec names no "
                          "augment_columns): word replacement applies to sentence-level tasks")
    if examples is None or featurize is None:
        raise ValueError("distill.augment needs the training examples and a featurize function "
                         "(prepare_distillation(..., train_examples=, featurize=))")
    mlm = MaskedLMChars(a.mlm, recipe.data.max_length) if a.mlm is not None else None
    replacer = WordReplacer(p=a.p, candidates=a.candidates, seed=recipe.train.seed if a.seed is None else a.seed,
                            dictionary=JiebaDictionary(), mlm=mlm)
    copies, stats = augment_examples(examples, spec.augment_columns, a.copies, replacer)
    logger.info("distillation: %s", stats.line())
    return featurize(copies)
