"""The distillation losses on tiny tensors, against values computed by hand (nlp/train/distill_losses.py),
and the layer settings against the models (nlp/train/distill.py resolve_layers)."""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

import nlp
from nlp._common import ConfigError
from nlp.tasks import get_task
from nlp.train.distill import AUGMENTED_KEY, DistillationModel, LayerPlan, resolve_layers
from nlp.train.distill_losses import hidden_loss, relation_loss, soft_loss, split_qkv

ASSET = Path(nlp.__file__).parent / "assets" / "ernie-tiny-zh"


def test_soft_loss_is_the_kl_at_the_temperature_times_its_square():
    s, t = torch.tensor([[0.0, 0.0]]), torch.tensor([[2.0, 0.0]])
    q1 = 1 / (1 + math.exp(-1.0))  # the teacher's softmax at T=2: sigmoid(2/2)
    kl = q1 * math.log(q1 / 0.5) + (1 - q1) * math.log((1 - q1) / 0.5)
    assert soft_loss(s, t, "softmax", 2.0, None).item() == pytest.approx(4 * kl, rel=1e-6)
    # per token (B, T, C): the padded token's (garbage) outputs are left out
    s3 = torch.tensor([[[0.0, 0.0], [5.0, -5.0]]])
    t3 = torch.tensor([[[2.0, 0.0], [-5.0, 5.0]]])
    assert soft_loss(s3, t3, "softmax", 2.0, torch.tensor([[1, 0]])).item() == pytest.approx(4 * kl, rel=1e-6)


def test_hidden_loss_is_the_mse_over_real_tokens():
    s = torch.tensor([[[1.0, 3.0], [100.0, 100.0]]])  # (1, 2, 2): the second token is padding
    t = torch.tensor([[[0.0, 1.0], [0.0, 0.0]]])
    assert hidden_loss(s, t, torch.tensor([[1, 0]])).item() == pytest.approx((1 + 4) / 2)
    rows = hidden_loss(torch.tensor([[1.0, 3.0]]), torch.tensor([[0.0, 1.0]]), None)  # [CLS] rows (N, H)
    assert rows.item() == pytest.approx(2.5)


def _qkv(x: torch.Tensor) -> dict[str, torch.Tensor]:
    return {"query": x, "key": x, "value": x}


def test_relation_loss_by_hand():
    """One relation head, two tokens: the student's queries are orthogonal, the teacher's equal,
    so the teacher's relation is uniform and the student's softmax([1/sqrt 2, 0])."""
    s = torch.tensor([[[1.0, 0.0], [0.0, 1.0]]])
    t = torch.tensor([[[1.0, 0.0], [1.0, 0.0]]])
    a = 1 / math.sqrt(2)
    p = math.exp(a) / (math.exp(a) + 1)  # the student's relation to its own token
    kl = 0.5 * math.log(0.5 / p) + 0.5 * math.log(0.5 / (1 - p))  # the same for both query rows
    got = relation_loss({"query": s}, {"query": t}, None, heads=1, relations=["query"])
    assert got.item() == pytest.approx(kl, rel=1e-6)
    # the kinds' losses are summed (MiniLM v2 sums Q-Q, K-K and V-V)
    assert relation_loss(_qkv(s), _qkv(t), None, heads=1).item() == pytest.approx(3 * kl, rel=1e-6)


def test_relation_loss_is_zero_for_the_same_relations_at_any_width():
    torch.manual_seed(0)
    x = torch.randn(2, 5, 8)
    assert relation_loss(_qkv(x), _qkv(x.clone()), None, heads=2).item() == pytest.approx(0.0, abs=1e-6)
    # a teacher twice as wide whose every relation head is the student's duplicated (scaled so
    # that its dot products over sqrt(2d) equal the student's over sqrt(d)) has the same relations
    wide = torch.cat([torch.cat([h, h], -1) for h in x.split(4, -1)], -1) * 2 ** -0.25  # (2, 5, 16)
    assert relation_loss(_qkv(x), _qkv(wide), None, heads=2).item() == pytest.approx(0.0, abs=1e-5)
    assert relation_loss(_qkv(x), _qkv(torch.randn(2, 5, 16)), None, heads=2).item() > 0.1
    with pytest.raises(ValueError, match="width 8 does not divide into 3 relation heads"):
        relation_loss(_qkv(x), _qkv(x), None, heads=3)


def test_relation_loss_masks_padding():
    """A padded batch gives the loss of its real tokens alone, whatever the padding holds."""
    torch.manual_seed(1)
    s, t = torch.randn(1, 3, 4), torch.randn(1, 3, 4)
    alone = relation_loss(_qkv(s), _qkv(t), None, heads=2)
    pad = torch.randn(1, 2, 4) * 50
    padded = relation_loss(_qkv(torch.cat([s, pad], 1)), _qkv(torch.cat([t, -pad], 1)),
                           torch.tensor([[1, 1, 1, 0, 0]]), heads=2)
    assert padded.item() == pytest.approx(alone.item(), rel=1e-5)
    unmasked = relation_loss(_qkv(torch.cat([s, pad], 1)), _qkv(torch.cat([t, -pad], 1)), None, heads=2)
    assert abs(unmasked.item() - alone.item()) > 1e-3  # the mask is what kept the padding out


def test_split_qkv_follows_the_fused_rows_q_k_v():
    qkv = torch.arange(6.0).view(1, 1, 6)
    parts = split_qkv(qkv)
    assert [parts[k].tolist() for k in ("query", "key", "value")] == [[[[0.0, 1.0]]], [[[2.0, 3.0]]], [[[4.0, 5.0]]]]


# --------------------------------------------------------------------------- layers


def _model(layers: int, hidden: int = 32, heads: int = 2, **kw):
    torch.manual_seed(0)
    config = nlp.AutoConfig.from_pretrained(ASSET, num_hidden_layers=layers, hidden_size=hidden,
                                            num_attention_heads=heads, intermediate_size=2 * hidden,
                                            id2label={0: "negative", 1: "positive"}, **kw)
    return get_task("text-classification").head(config)


def _section(**kw):
    d = dict(hidden_weight=1.0, layer_pairs="last", relation_weight=0.0, relation_layers=(-1, -1),
             relation_heads=None, relations=["query", "key", "value"])
    return SimpleNamespace(**{**d, **kw})


def test_layer_pairs_resolve_against_the_models():
    student, teacher = _model(2), _model(6, hidden=64)
    assert resolve_layers(_section(), student, teacher).hidden == ((1, 5),)
    assert resolve_layers(_section(layer_pairs="uniform"), student, teacher).hidden == ((0, 2), (1, 5))
    assert resolve_layers(_section(layer_pairs=[[0, 1], [-1, -2]]), student, teacher).hidden == ((0, 1), (1, 4))
    plan = resolve_layers(_section(hidden_weight=0.0, relation_weight=1.0, relation_layers=(0, -3)), student, teacher)
    assert plan.hidden == () and plan.relation == (0, 3) and plan.relation_heads == 2  # the teacher's heads
    with pytest.raises(ConfigError, match=r"distill.layer_pairs: \[2, 5\] names student layer 2, but the student "
                                          r"has 2 layers \(valid: 0..1, or -2..-1 from the last\)"):
        resolve_layers(_section(layer_pairs=[[0, 1], [2, 5]]), student, teacher)
    with pytest.raises(ConfigError, match=r"distill.relation_layers: \[0, 6\] names teacher layer 6, but the teacher "
                                          r"has 6 layers"):
        resolve_layers(_section(relation_weight=1.0, relation_layers=(0, 6)), student, teacher)
    with pytest.raises(ConfigError, match="uniform maps the student's 6 layers onto the teacher's 2"):
        resolve_layers(_section(layer_pairs="uniform"), teacher, student)
    with pytest.raises(ConfigError, match="relation_heads is 3, which does not divide the student's attention width 32"):
        resolve_layers(_section(relation_weight=1.0, relation_heads=3), student, teacher)


def test_relations_of_a_head_pruned_student_split_its_attention_width():
    """A student with one head of 32 in a 64-wide model (width pruning: attention_head_size) has an
    attention width of 32; the relation heads divide that and the teacher's 64."""
    student, teacher = _model(2, hidden=64, heads=1, attention_head_size=32), _model(2, hidden=64)
    plan = resolve_layers(_section(hidden_weight=0.0, relation_weight=1.0, relation_heads=4), student, teacher)
    model = DistillationModel(student, {}, temperature=2.0, soft_weight=0.0, hard_weight=0.0, relation_weight=1.0,
                              layers=plan, teacher=teacher)
    batch = {k: v for k, v in _batch().items() if k not in ("teacher_logits", "labels")}
    model.train()
    assert model(**batch).loss.item() > 0
    with pytest.raises(ConfigError, match="relation_heads is 3, which does not divide the student's attention width 32"):
        resolve_layers(_section(hidden_weight=0.0, relation_weight=1.0, relation_heads=3), student, teacher)


def _batch(n: int = 4, length: int = 6) -> dict[str, torch.Tensor]:
    torch.manual_seed(2)
    ids = torch.randint(5, 500, (n, length))
    mask = torch.ones(n, length, dtype=torch.long)
    mask[0, 4:] = 0
    ids[0, 4:] = 0
    return {"input_ids": ids, "attention_mask": mask, "labels": torch.tensor([0, 1, 1, 0][:n]),
            "teacher_logits": torch.randn(n, 2)}


def test_augmented_rows_learn_the_teacher_and_never_their_labels():
    student, teacher = _model(2), _model(2, hidden=64)
    model = DistillationModel(student, {"logits": "softmax"}, temperature=2.0, soft_weight=1.0, hard_weight=1.0,
                              hidden_weight=1.0, relation_weight=1.0,
                              layers=LayerPlan(hidden=((0, 1),), relation=(1, 1), relation_heads=2), teacher=teacher)
    model.eval()  # no dropout: the same batch gives the same loss
    batch = {**_batch(), AUGMENTED_KEY: torch.tensor([0.0, 0.0, 1.0, 1.0])}
    loss = model(**dict(batch)).loss.item()
    flipped = dict(batch, labels=torch.tensor([0, 1, 0, 1]))  # the augmented rows' labels changed
    assert model(**flipped).loss.item() == pytest.approx(loss, rel=1e-6)
    original_flipped = dict(batch, labels=torch.tensor([1, 1, 1, 0]))  # an original row's label changed
    assert abs(model(**original_flipped).loss.item() - loss) > 1e-4
    # the loss is the mean over rows of each row's terms: the two halves, each its own batch
    first = {k: v[:2] for k, v in batch.items() if k != AUGMENTED_KEY}
    rest = {k: v[2:] for k, v in batch.items() if k not in (AUGMENTED_KEY, "labels")}
    halves = 0.5 * model(**first).loss.item() + 0.5 * model(**rest).loss.item()
    assert loss == pytest.approx(halves, rel=1e-5)
    assert model(**{k: v for k, v in batch.items() if k != AUGMENTED_KEY}).loss.item() != pytest.approx(loss)


def test_the_teacher_runs_only_up_to_the_deepest_layer_asked_for():
    student, teacher = _model(2), _model(4, hidden=64)
    ran = []
    for i, layer in enumerate(teacher._encoder_backbone().layers):
        layer.register_forward_hook(lambda *a, i=i: ran.append(i))
    model = DistillationModel(student, {}, temperature=2.0, soft_weight=0.0, hard_weight=1.0, relation_weight=1.0,
                              layers=LayerPlan(relation=(1, 1), relation_heads=2), teacher=teacher)
    model.train()
    batch = {k: v for k, v in _batch().items() if k != "teacher_logits"}
    out = model(**batch)
    assert ran == [0, 1] and out.loss.item() > 0
    out.loss.backward()  # the relation loss reaches the student's own q, k, v projection
    assert student._encoder_backbone().layers[1].qkv.weight.grad.abs().sum() > 0
