"""The encoder's kernels (nlp.models.fast_paths): the switch, and FastOps against the plain-torch
reference, also with each private torch op it uses taken away."""

from __future__ import annotations

import types

import pytest
import torch

from nlp.models import ErnieForMaskedLM, ErnieModel, _linear, fast_paths, preset_config
from nlp.models.fast_paths import FastOps, TorchOps, select_ops


def tiny(name: str, **kw):
    return preset_config(name, vocab_size=101, hidden_size=32, num_hidden_layers=2,
                         num_attention_heads=4, intermediate_size=48, max_position_embeddings=64, **kw)


def batches(config):
    g = torch.Generator().manual_seed(0)
    padded = {"input_ids": torch.randint(1, 101, (3, 11), generator=g), "attention_mask": torch.ones(3, 11, dtype=torch.long)}
    padded["attention_mask"][0, 6:] = 0
    pack = torch.tensor([[1] * 5 + [2] * 3 + [3] * 4 + [0], [1] * 7 + [2] * 2 + [0] * 4])
    packed = {"input_ids": torch.randint(1, 101, pack.shape, generator=g) * pack.gt(0), "pack_ids": pack}
    return padded, packed


def build(config, env, monkeypatch, **env_more):
    """A model built under the given NLP_FAST_PATHS value, with the weights of seed 3."""
    monkeypatch.setenv("NLP_FAST_PATHS", env)
    for key, value in env_more.items():
        monkeypatch.setenv(key, value)
    torch.manual_seed(3)
    model = ErnieModel(config)
    monkeypatch.delenv("NLP_FAST_PATHS")
    return model


def outputs(model, batch):
    """What the fast paths touch: the inference forward (fused epilogues), the pooled request
    (rows-only last layer), and the autograd forward + gradients."""
    model.eval()
    with torch.inference_mode():
        hidden = model(**batch).last_hidden_state.clone()
        pooled = model.pooled_output(**batch).clone()
    model.zero_grad()
    out = model(**batch)
    (out.last_hidden_state.square().mean() + model.pooled_output(**batch).sum()).backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters()}
    return hidden, pooled, out.last_hidden_state.detach(), grads


def assert_same_outputs(got, want):
    for a, b in zip(got[:3], want[:3]):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)
    assert got[3].keys() == want[3].keys()
    for n in want[3]:
        torch.testing.assert_close(got[3][n], want[3][n], atol=1e-5, rtol=1e-4, msg=n)


def test_the_switch_picks_the_kernels_once_per_model(monkeypatch):
    monkeypatch.setenv("NLP_FAST_PATHS", "0")
    assert type(select_ops()) is TorchOps
    reference = ErnieModel(tiny("ernie-3.0-nano-zh"))
    monkeypatch.delenv("NLP_FAST_PATHS")
    fast = ErnieModel(tiny("ernie-3.0-nano-zh"))
    assert type(reference.ops) is TorchOps and isinstance(fast.ops, FastOps)
    # every layer of a model shares the model's choice, and it stays after the switch changes
    assert all(layer.ops is reference.ops for layer in reference.layers) and reference.embeddings.ops is reference.ops
    monkeypatch.setenv("NLP_ONEDNN_LINEAR", "0")
    assert select_ops().onednn_linear is False and isinstance(fast.ops, FastOps)


@pytest.mark.parametrize("name", ["ernie-3.0-nano-zh", "ernie-1.0-base-zh"])  # GELU, ReLU
@pytest.mark.parametrize("onednn", ["1", "0"])
def test_fast_kernels_equal_the_reference(name, onednn, monkeypatch):
    config = tiny(name)
    for batch in batches(config):
        want = outputs(build(config, "0", monkeypatch), batch)
        got = outputs(build(config, "1", monkeypatch, NLP_ONEDNN_LINEAR=onednn), batch)
        assert_same_outputs(got, want)


def test_reference_dropout_trains(monkeypatch):
    config = tiny("ernie-3.0-nano-zh", hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1)
    model = build(config, "0", monkeypatch).train()
    padded, _ = batches(config)
    out = model(**padded).last_hidden_state
    out.sum().backward()
    assert torch.isfinite(out).all() and model.layers[0].qkv.weight.grad is not None


class _WithoutBinary:
    """oneDNN's linear op without its fused-add overload (`.binary`), as an older torch has it."""

    def __init__(self, op):
        self._op = op

    def __call__(self, *args):
        return self._op(*args)


@pytest.fixture
def redetect_onednn():
    """Re-run the once-per-process oneDNN check before and after the test."""
    _linear._onednn_linear_works.cache_clear()
    yield
    _linear._onednn_linear_works.cache_clear()


@pytest.mark.parametrize("missing", ["_addmm_activation", "mkldnn", "mkldnn.binary", "all"])
@pytest.mark.parametrize("name", ["ernie-3.0-nano-zh", "ernie-1.0-base-zh"])
def test_fallback_when_a_private_torch_op_is_missing(name, missing, monkeypatch, redetect_onednn):
    if not _linear.onednn_linear_available() and missing != "_addmm_activation":
        pytest.skip("this torch has no oneDNN linear to take away")
    config = tiny(name)
    wants = [outputs(build(config, "0", monkeypatch), batch) for batch in batches(config)]
    if missing in ("_addmm_activation", "all"):
        monkeypatch.delattr(torch, "_addmm_activation")
    if missing in ("mkldnn", "all"):
        monkeypatch.setattr(torch.ops, "mkldnn", types.SimpleNamespace())
    if missing == "mkldnn.binary":
        monkeypatch.setattr(torch.ops, "mkldnn", types.SimpleNamespace(
            _linear_pointwise=_WithoutBinary(torch.ops.mkldnn._linear_pointwise)))
    _linear._onednn_linear_works.cache_clear()
    model = build(config, "1", monkeypatch)
    ops = model.ops
    assert isinstance(ops, FastOps)
    assert ops.addmm_activation == (missing not in ("_addmm_activation", "all"))
    assert ops.onednn_linear == (missing in ("_addmm_activation", "mkldnn.binary"))
    assert ops.onednn_linear_add == (missing == "_addmm_activation")
    for batch, want in zip(batches(config), wants):
        assert_same_outputs(outputs(model, batch), want)  # a call to a missing op would raise


def test_masked_lm_head_uses_the_models_kernels(monkeypatch):
    config = tiny("ernie-3.0-nano-zh")
    padded, _ = batches(config)
    logits = []
    for env in ("0", "1"):
        monkeypatch.setenv("NLP_FAST_PATHS", env)
        torch.manual_seed(3)
        model = ErnieForMaskedLM(config).eval()
        with torch.no_grad():
            logits.append(model(**padded).logits)
    torch.testing.assert_close(logits[1], logits[0], atol=1e-5, rtol=1e-5)
    assert fast_paths.FAST_PATHS_ENV == "NLP_FAST_PATHS"


def test_gemm_row_buckets():
    from nlp.models.fast_paths import gemm_row_bucket

    assert [gemm_row_bucket(m) for m in (1, 64, 65, 512, 513, 769, 4096, 4097)] == [64, 64, 128, 512, 576, 832, 4096, 4608]
    buckets = {gemm_row_bucket(m) for m in range(1, 4097)}
    assert len(buckets) == 32 and all(gemm_row_bucket(b) == b for b in buckets)
    assert all(0 <= gemm_row_bucket(m) - m < max(64, m / 8) for m in range(1, 20_000))  # under 1/8 more past 512


@pytest.mark.parametrize("bf16", [False, True])
def test_row_buckets_pad_the_gemms_and_change_no_output(bf16, monkeypatch):
    """A server's model (nlp.models.bucket_gemm_rows) runs every encoder GEMM of an inference
    forward at a bucketed row count; the outputs are the unbucketed ones. Training is untouched."""
    from nlp.models import bucket_gemm_rows
    from nlp.models.fast_paths import gemm_row_bucket

    if bf16 and not torch.backends.mkldnn.is_available():
        pytest.skip("bf16 CPU autocast needs oneDNN")
    model = build(tiny("ernie-3.0-mini-zh"), "1", monkeypatch).eval()
    padded, _ = batches(model.config)  # 3 rows of 11 tokens: 33 rows per GEMM, 3 [CLS] rows
    rows = []
    for name in ("linear", "linear_gelu", "linear_add"):
        real = getattr(_linear, name)
        monkeypatch.setattr(_linear, name, lambda x, *a, _real=real: rows.append(x.reshape(-1, x.shape[-1]).shape[0])
                            or _real(x, *a))

    def forward():
        with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            return model(**padded).last_hidden_state.float(), model.pooled_output(**padded).float()

    plain = forward()
    assert 33 in rows and 3 in rows  # not bucketed by default
    assert bucket_gemm_rows(model) and repr(model.ops).endswith("row_buckets=True)")
    rows.clear()
    bucketed = forward()
    assert rows and set(rows) == {gemm_row_bucket(33)}  # every GEMM: 64 rows, the [CLS] rows' too
    tol = 2e-2 if bf16 else 1e-5
    for got, want in zip(bucketed, plain):
        torch.testing.assert_close(got, want, atol=tol, rtol=tol)
    rows.clear()
    model.train()
    model(**padded).last_hidden_state.sum().backward()  # autograd: the GEMMs run at their own rows
    assert rows and 64 not in rows
    bucket_gemm_rows(model, enabled=False)
    assert not model.ops.row_buckets
    assert not bucket_gemm_rows(build(tiny("ernie-3.0-mini-zh"), "0", monkeypatch))  # TorchOps: nothing to set


def _qkv(B, nh, T, hd, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(B, nh, T, hd, generator=g).to(dtype) for _ in range(3))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_short_rows_attend_as_sdpa_does(dtype):
    """`_short_attention` (two batched GEMMs) gives SDPA's numbers: no mask, key padding,
    block-diagonal packed rows (B, 1, T, T), an additive mask; fp32 to rounding, bf16 within bf16."""
    from nlp.models.fast_paths import _short_attention

    q, k, v = _qkv(3, 4, 11, 8, dtype)
    lengths = torch.tensor([11, 6, 1])
    padding = (torch.arange(11)[None, :] < lengths[:, None])[:, None, None, :]  # (B, 1, 1, T)
    pack = torch.tensor([[1] * 5 + [2] * 6, [1] * 11, [1] * 3 + [2] * 3 + [3] * 5])
    packed = (pack[:, None, :, None] == pack[:, None, None, :])  # (B, 1, T, T)
    additive = torch.zeros(3, 1, 1, 11, dtype=dtype).masked_fill(~padding, torch.finfo(dtype).min)
    tol = 1e-5 if dtype == torch.float32 else 2e-2
    for mask in (None, padding, packed, additive):
        want = torch.nn.functional.scaled_dot_product_attention(q.float(), k.float(), v.float(),
                                                                attn_mask=None if mask is None else
                                                                mask if mask.dtype == torch.bool else mask.float())
        got = _short_attention(q, k, v, mask)
        assert got.dtype == dtype and got.shape == q.shape
        torch.testing.assert_close(got.float(), want, atol=tol, rtol=tol)


def test_short_attention_applies_to_cpu_inference_of_short_rows_only(monkeypatch):
    """FastOps.attention takes the batched-GEMM path in CPU inference on rows of at most
    SHORT_ATTENTION_TOKENS, outside autocast; SDPA elsewhere (training, autocast, long rows)."""
    taken = []
    real = fast_paths._short_attention
    monkeypatch.setattr(fast_paths, "_short_attention", lambda *a: taken.append(a[0].shape[-2]) or real(*a))
    ops = select_ops()
    short, long = _qkv(2, 2, 16, 8, torch.float32), _qkv(1, 2, fast_paths.SHORT_ATTENTION_TOKENS + 1, 8, torch.float32)
    with torch.inference_mode():
        ops.attention(*short, None, 0.0)
        assert taken == [16]
        ops.attention(*long, None, 0.0)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            ops.attention(*short, None, 0.0)
    trained = [t.clone().requires_grad_() for t in short]
    ops.attention(*trained, None, 0.0).sum().backward()
    assert taken == [16] and trained[0].grad is not None


@pytest.mark.parametrize("onednn", ["1", "0"])
def test_a_model_cast_to_bf16_runs_its_fast_paths_and_agrees_with_fp32(onednn, monkeypatch):
    """The inference precision "bf16" (a model cast to bf16): the forward stays in bf16 end to
    end and agrees with the fp32 model within bf16's rounding, padded and packed."""
    if not torch.backends.mkldnn.is_available():
        pytest.skip("bf16 CPU kernels need oneDNN")
    config = tiny("ernie-3.0-nano-zh")
    fp32 = build(config, "1", monkeypatch, NLP_ONEDNN_LINEAR=onednn).eval()
    bf16 = build(config, "1", monkeypatch, NLP_ONEDNN_LINEAR=onednn).eval().to(torch.bfloat16)
    for batch in batches(config):
        with torch.inference_mode():
            want = fp32(**batch).last_hidden_state
            got = bf16(**batch).last_hidden_state
        assert got.dtype == torch.bfloat16
        torch.testing.assert_close(got.float(), want, atol=6e-2, rtol=5e-2)
