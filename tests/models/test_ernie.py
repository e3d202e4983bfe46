"""Every preset (shrunk): forward, backward, save/load; packing; checkpointing; bad inputs."""

from __future__ import annotations

import pytest
import torch

from nlp._common import DataError
from nlp.models import PRESETS, ErnieForMaskedLM, ErnieModel, _linear, preset_config


def tiny(name: str, **kw):
    """The preset's architecture kind (activation, task ids, token types, eps) at toy size."""
    return preset_config(name, vocab_size=101, hidden_size=32, num_hidden_layers=2,
                         num_attention_heads=4, intermediate_size=48, max_position_embeddings=64, **kw)


def batch_for(config, B=2, T=9, seed=0):
    g = torch.Generator().manual_seed(seed)
    batch = {"input_ids": torch.randint(1, config.vocab_size, (B, T), generator=g),
             "token_type_ids": torch.randint(0, config.type_vocab_size, (B, T), generator=g),
             "attention_mask": torch.ones(B, T, dtype=torch.long)}
    batch["attention_mask"][0, 6:] = 0
    if config.use_task_id:
        batch["task_type_ids"] = torch.randint(0, config.task_type_vocab_size, (B, T), generator=g)
    return batch


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_preset_forward_backward_save_load(tmp_path, name):
    torch.manual_seed(0)
    config = tiny(name)
    model = ErnieForMaskedLM(config).train()
    batch = batch_for(config)
    out = model(**batch, labels=batch["input_ids"])
    assert out.logits.shape == (2, 9, 101) and torch.isfinite(out.loss)
    out.loss.backward()
    grads = [p.grad for p in model.parameters() if p.requires_grad]
    assert all(g is not None and torch.isfinite(g).all() for g in grads)
    model.eval().save_pretrained(tmp_path)
    again = ErnieForMaskedLM.from_pretrained(tmp_path)
    assert again.config.to_dict() == model.config.replace().to_dict() | {
        "architectures": again.config.extra["architectures"]}
    with torch.no_grad():
        torch.testing.assert_close(again(**batch).logits, model(**batch).logits, rtol=0, atol=0)


def test_preset_hyperparameters_follow_paddlenlp_and_cards():
    e1 = PRESETS["ernie-1.0-base-zh"]
    assert (e1["hidden_act"], e1["vocab_size"], e1["max_position_embeddings"], e1["use_task_id"]) \
        == ("relu", 18000, 513, False)
    for n in ("base", "xbase", "medium", "mini", "micro", "nano"):
        row = PRESETS[f"ernie-3.0-{n}-zh"]
        assert row["use_task_id"] is True and row["vocab_size"] == 40000
        assert row["layer_norm_eps"] == 1e-12 and row["max_position_embeddings"] == 2048
    for n in ("base", "medium", "mini", "micro", "nano", "pico"):
        assert PRESETS[f"ernie-3.0-tiny-{n}-v2-zh"]["use_task_id"] is False
    assert PRESETS["ernie-3.0-base-zh"]["task_type_vocab_size"] == 3
    assert PRESETS["ernie-3.0-mini-zh"]["task_type_vocab_size"] == 16
    assert (PRESETS["ernie-3.0-xbase-zh"]["hidden_size"], PRESETS["ernie-3.0-xbase-zh"]["num_hidden_layers"]) == (1024, 20)
    assert PRESETS["ernie-3.0-tiny-pico-v2-zh"]["num_attention_heads"] == 2
    assert PRESETS["rbt3"]["num_hidden_layers"] == 3 and PRESETS["rbt3"]["model_type"] == "bert"
    assert PRESETS["chinese-macbert-large"]["hidden_size"] == 1024
    for row in PRESETS.values():
        assert row["source"].startswith("https://")
    for name in PRESETS:  # every row builds a valid config
        preset_config(name)


def test_unknown_preset_suggests():
    with pytest.raises(KeyError, match="Did you mean 'ernie-3.0-mini-zh'"):
        preset_config("ernie-3.0-mni-zh")


@pytest.mark.parametrize("name", ["ernie-3.0-mini-zh", "bert-base-chinese"])
def test_packed_rows_equal_padded_rows(name):
    torch.manual_seed(1)
    config = tiny(name)
    model = ErnieModel(config).eval()
    lengths = [[5, 3, 4], [7, 2]]  # two packed rows of width 13
    T = 13
    seqs = [[torch.randint(1, 101, (n,)) for n in row] for row in lengths]
    ttypes = [[torch.randint(0, config.type_vocab_size, (n,)) for n in row] for row in lengths]
    ids = torch.zeros(2, T, dtype=torch.long)
    tt = torch.zeros_like(ids)
    pack = torch.zeros_like(ids)
    pos = torch.zeros_like(ids)
    for r, row in enumerate(lengths):
        start = 0
        for k, n in enumerate(row):
            ids[r, start:start + n] = seqs[r][k]
            tt[r, start:start + n] = ttypes[r][k]
            pack[r, start:start + n] = k + 1
            pos[r, start:start + n] = torch.arange(n)
            start += n
    with torch.no_grad():
        packed = model(ids, attention_mask=(pack > 0).long(), token_type_ids=tt, pack_ids=pack,
                       position_ids=pos)
        derived = model(ids, token_type_ids=tt, pack_ids=pack)  # positions computed from pack_ids
        torch.testing.assert_close(derived.last_hidden_state, packed.last_hidden_state)
        flat = [(r, k) for r, row in enumerate(lengths) for k in range(len(row))]
        assert packed.pooler_output.shape == (len(flat), 32)
        for s, (r, k) in enumerate(flat):
            n = lengths[r][k]
            start = sum(lengths[r][:k])
            one = model(seqs[r][k][None], token_type_ids=ttypes[r][k][None])
            torch.testing.assert_close(packed.last_hidden_state[r, start:start + n], one.last_hidden_state[0],
                                       atol=1e-5, rtol=1e-5)
            torch.testing.assert_close(packed.pooler_output[s], one.pooler_output[0], atol=1e-5, rtol=1e-5)


def test_padded_rows_equal_unpadded():
    torch.manual_seed(2)
    config = tiny("ernie-3.0-nano-zh")
    model = ErnieModel(config).eval()
    ids = torch.randint(1, 101, (2, 8))
    mask = torch.ones_like(ids)
    mask[1, 5:] = 0
    with torch.no_grad():
        out = model(ids, attention_mask=mask).last_hidden_state
        alone = model(ids[1:, :5]).last_hidden_state
    torch.testing.assert_close(out[1, :5], alone[0], atol=1e-5, rtol=1e-5)


def _packed_batch():
    """Two packed rows (sequences of 5+3+4 and 7+2 tokens, width 13) and their pack ids."""
    g = torch.Generator().manual_seed(4)
    pack = torch.tensor([[1] * 5 + [2] * 3 + [3] * 4 + [0], [1] * 7 + [2] * 2 + [0] * 4])
    ids = torch.randint(1, 101, pack.shape, generator=g) * pack.gt(0)
    return ids, pack


@pytest.mark.parametrize("name", ["ernie-3.0-nano-zh", "ernie-1.0-base-zh", "bert-base-chinese"])
@pytest.mark.parametrize("checkpointing", [False, True])
def test_pooled_output_equals_full_last_layer(name, checkpointing):
    """pooled_output computes the last layer at the [CLS] positions only: same pooled output and
    same gradients as the full model, padded and packed, with and without checkpointing."""
    torch.manual_seed(5)
    config = tiny(name, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    model = ErnieModel(config).train()
    if checkpointing:
        model.gradient_checkpointing_enable()
    padded = batch_for(config, B=3, T=11)
    ids, pack = _packed_batch()
    for batch in (padded, {"input_ids": ids, "pack_ids": pack}):
        outs, grads = [], []
        for pooled in (model(**batch).pooler_output, model.pooled_output(**batch)):
            model.zero_grad()
            (pooled * torch.linspace(-1, 1, config.hidden_size)).sum().backward()
            outs.append(pooled.detach())
            grads.append({n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None})
        torch.testing.assert_close(outs[1], outs[0], atol=1e-6, rtol=1e-5)
        assert grads[0].keys() == grads[1].keys()
        for n in grads[0]:
            torch.testing.assert_close(grads[1][n], grads[0][n], atol=1e-6, rtol=1e-4, msg=n)


def test_pooled_output_runs_the_last_layer_through_its_own_call():
    """The [CLS]-rows trick goes through the layer's call (`ErnieLayer.forward(x, attn, rows)`):
    whatever wraps a layer (hooks; a sharding unit that gathers its weights) sees it run."""
    config = tiny("ernie-3.0-nano-zh")
    model = ErnieModel(config).eval()
    calls = []
    for i, layer in enumerate(model.layers):
        layer.register_forward_pre_hook(lambda module, args, i=i: calls.append(i))
    model.pooled_output(**batch_for(config))
    assert calls == list(range(config.num_hidden_layers))


@pytest.mark.parametrize("checkpointing", [False, True])
def test_pooled_output_of_a_model_sharded_per_layer(tmp_path, checkpointing):
    """FSDP2 units per layer + root (what train.distributed.strategy=fsdp builds), on a 1-process
    gloo group: the last layer's weights are gathered for the [CLS] rows too (it used to fail
    with a mixed Tensor/DTensor error in the oneDNN linear). Same outputs and gradients."""
    import copy

    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor import DTensor

    torch.manual_seed(3)
    config = tiny("ernie-3.0-nano-zh", hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    backbone = ErnieModel(config).train()
    if checkpointing:
        backbone.gradient_checkpointing_enable()

    class Pooled(torch.nn.Module):  # a sequence-classification head's call, without the head
        def __init__(self):
            super().__init__()
            self.backbone = copy.deepcopy(backbone)

        def forward(self, **batch):
            return self.backbone.pooled_output(**batch)

    plain = Pooled()
    sharded = copy.deepcopy(plain)
    batch = batch_for(config, B=3, T=11)
    dist.init_process_group("gloo", store=dist.FileStore(str(tmp_path / "store"), 1), rank=0, world_size=1)
    try:
        mesh = init_device_mesh("cpu", (1,))  # the default mesh is CUDA's wherever CUDA is available
        for layer in sharded.backbone.layers:
            fully_shard(layer, mesh=mesh)
        fully_shard(sharded, mesh=mesh)
        assert isinstance(sharded.backbone.layers[-1].qkv.weight, DTensor)
        outs = []
        for model in (plain, sharded):
            pooled = model(**batch)
            (pooled * torch.linspace(-1, 1, config.hidden_size)).sum().backward()
            outs.append(pooled.detach())
        torch.testing.assert_close(outs[1], outs[0], atol=1e-6, rtol=1e-5)
        for (name, p), q in zip(plain.named_parameters(), sharded.parameters()):
            torch.testing.assert_close(q.grad.full_tensor(), p.grad, atol=1e-6, rtol=1e-4, msg=name)
    finally:
        dist.destroy_process_group()


def test_pooled_output_with_attention_dropout_trains_and_needs_a_pooler():
    config = tiny("ernie-3.0-nano-zh", attention_probs_dropout_prob=0.1)
    model = ErnieModel(config).train()
    pooled = model.pooled_output(**batch_for(config))
    pooled.sum().backward()
    assert pooled.shape == (2, 32) and model.layers[-1].ffn_in.weight.grad is not None
    with pytest.raises(ValueError, match="pooler"):
        ErnieModel(config, add_pooling_layer=False).pooled_output(**batch_for(config))


@pytest.mark.parametrize("dropout", [0.0, 0.1])
def test_checkpointed_grads_equal_plain(dropout):
    config = tiny("ernie-3.0-mini-zh", hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout)
    torch.manual_seed(3)
    model = ErnieForMaskedLM(config).train()
    batch = batch_for(config)

    def grads():
        model.zero_grad()
        torch.manual_seed(7)  # same dropout masks in both runs
        model(**batch, labels=batch["input_ids"]).loss.backward()
        return [p.grad.clone() for p in model.parameters()]

    plain = grads()
    model.gradient_checkpointing_enable()
    assert model.is_gradient_checkpointing
    ckpt = grads()
    model.gradient_checkpointing_disable()
    for a, b in zip(plain, ckpt):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-5)


def test_eval_is_deterministic_and_train_uses_dropout():
    config = tiny("ernie-3.0-mini-zh")
    model = ErnieModel(config)
    batch = batch_for(config)
    model.eval()
    with torch.no_grad():
        torch.testing.assert_close(model(**batch).last_hidden_state, model(**batch).last_hidden_state)
        model.train()
        assert not torch.allclose(model(**batch).last_hidden_state, model(**batch).last_hidden_state)


@pytest.fixture(scope="module")
def small_model():
    return ErnieModel(tiny("ernie-3.0-mini-zh")).eval()


def test_ids_outside_vocab(small_model):
    with pytest.raises(DataError, match=r"id 101, outside the vocabulary \[0, 101\)"):
        small_model(torch.tensor([[1, 2, 101]]))
    with pytest.raises(DataError, match="outside the vocabulary"):
        small_model(torch.tensor([[1, -1]]))


def test_too_long(small_model):
    with pytest.raises(DataError, match="sequence length 65 exceeds max_position_embeddings=64"):
        small_model(torch.ones(1, 65, dtype=torch.long))


def test_shape_mismatch(small_model):
    with pytest.raises(DataError, match=r"attention_mask has shape \(1, 4\) but input_ids has \(1, 5\)"):
        small_model(torch.ones(1, 5, dtype=torch.long), attention_mask=torch.ones(1, 4))
    with pytest.raises(DataError, match="input_ids must have shape"):
        small_model(torch.ones(5, dtype=torch.long))


def test_wrong_dtypes(small_model):
    with pytest.raises(TypeError, match="input_ids must be an integer tensor"):
        small_model(torch.ones(1, 5))
    with pytest.raises(TypeError, match="token_type_ids must be an integer tensor"):
        small_model(torch.ones(1, 5, dtype=torch.long), token_type_ids=torch.zeros(1, 5))
    with pytest.raises(TypeError, match="input_ids must be a torch.Tensor"):
        small_model([[1, 2, 3]])


def test_type_ids_out_of_range(small_model):
    with pytest.raises(DataError, match=r"token_type_ids holds 4, outside \[0, 4\)"):
        small_model(torch.ones(1, 3, dtype=torch.long), token_type_ids=torch.full((1, 3), 4))


def test_task_ids_on_model_without_task_embedding():
    model = ErnieModel(tiny("ernie-3.0-tiny-mini-v2-zh")).eval()
    with pytest.raises(DataError, match="use_task_id=False"):
        model(torch.ones(1, 3, dtype=torch.long), task_type_ids=torch.zeros(1, 3, dtype=torch.long))


@pytest.mark.parametrize("onednn", [True, False])
@pytest.mark.parametrize("name", ["ernie-3.0-nano-zh", "ernie-1.0-base-zh"])  # GELU, ReLU
def test_inference_path_with_fused_activation_equals_autograd_path(name, onednn, monkeypatch):
    """Without autograd on CPU the FFN activation is fused into the GEMM: oneDNN's GELU epilogue,
    or (ReLU, or no oneDNN) in place on the GEMM output (torch._addmm_activation). Outputs must
    equal the autograd path's, pooled_output included."""
    monkeypatch.setenv("NLP_ONEDNN_LINEAR", "1" if onednn else "0")  # read when the model is built
    if onednn and not _linear.onednn_linear_available():
        pytest.skip("this torch has no oneDNN linear")
    torch.manual_seed(3)
    config = tiny(name)
    assert config.hidden_act in ("gelu", "relu")
    model = ErnieModel(config).eval()
    batch = batch_for(config)
    reference = model(**batch)  # grad enabled, parameters require grad: the plain path
    calls, gelu_calls = [], []
    real, real_gelu = torch._addmm_activation, _linear.linear_gelu
    monkeypatch.setattr(torch, "_addmm_activation", lambda *a, **k: calls.append(k) or real(*a, **k))
    monkeypatch.setattr(_linear, "linear_gelu",
                        lambda *a: (lambda out: gelu_calls.append(out is not None) or out)(real_gelu(*a)))
    with torch.inference_mode():
        fast = model(**batch)
        pooled = model.pooled_output(**batch)
    fused_by_onednn = onednn and config.hidden_act == "gelu"
    assert sum(gelu_calls) == (2 * config.num_hidden_layers if fused_by_onednn else 0)
    assert len(calls) == (0 if fused_by_onednn else 2 * config.num_hidden_layers)
    assert all(c["use_gelu"] == (config.hidden_act == "gelu") for c in calls)
    torch.testing.assert_close(fast.last_hidden_state, reference.last_hidden_state.detach(), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(pooled, reference.pooler_output.detach(), atol=1e-5, rtol=1e-5)


def _old_sparse_head(model, ids, labels):
    """The sparse head nlp.train.pretrain had (`_SparseMaskedLM.forward` with labels): the
    reference the model's `sparse_logits` must reproduce bit for bit."""
    x = model.backbone(ids).last_hidden_state
    where = labels.ne(-100)
    h = model.mlm_norm(model.act(model.mlm_dense(x[where])))
    logits = torch.nn.functional.linear(h, model.backbone.embeddings.word.weight, model.mlm_bias)
    target = labels[where]
    loss = torch.nn.functional.cross_entropy(logits, target) if target.numel() else logits.sum() * 0.0
    return loss, logits


@pytest.mark.parametrize("dropout", [0.0, 0.1])
def test_sparse_logits_equal_the_old_sparse_head_and_the_dense_loss(dropout):
    torch.manual_seed(0)
    config = tiny("ernie-3.0-tiny-pico-v2-zh", hidden_dropout_prob=dropout)
    model = ErnieForMaskedLM(config, sparse_logits=True).train()
    ids = torch.randint(5, 101, (2, 12))
    labels = torch.full_like(ids, -100)
    labels[0, 3], labels[1, 5], labels[1, 6] = 7, 8, 9
    runs = []
    for fn in (lambda: _old_sparse_head(model, ids, labels), lambda: model(ids, labels=labels)):
        model.zero_grad()
        torch.manual_seed(1)
        out = fn()
        loss, logits = out if isinstance(out, tuple) else (out.loss, out.logits)
        loss.backward()
        runs.append((loss.detach(), logits.detach(), {n: p.grad.clone() for n, p in model.named_parameters()}))
    (old_loss, old_logits, old_grads), (loss, logits, grads) = runs
    assert logits.shape == (3, 101)
    assert torch.equal(loss, old_loss) and torch.equal(logits, old_logits)
    assert all(torch.equal(grads[n], old_grads[n]) for n in old_grads)
    model.eval()
    with torch.no_grad():
        dense = model(ids)  # no labels: the full (B, T, V) logits
        sparse = model(ids, labels=labels)
        model.sparse_logits = False
        dense_loss = model(ids, labels=labels).loss
    assert dense.logits.shape == (2, 12, 101)
    torch.testing.assert_close(sparse.logits, dense.logits[labels != -100], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(sparse.loss, dense_loss, atol=1e-6, rtol=1e-5)
    empty = torch.full_like(ids, -100)
    model.sparse_logits = True
    assert model(ids, labels=empty).loss.item() == 0.0  # no labelled position: a zero loss, no NaN
