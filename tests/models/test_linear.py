"""The oneDNN linear layers agree with F.linear: outputs, the three gradients, fused epilogues,
and the fallbacks (autocast, under autograd, oneDNN switched off)."""

from __future__ import annotations

import os

import pytest
import torch
import torch.nn.functional as F

from nlp.models import _linear

needs_onednn = pytest.mark.skipif(not _linear.onednn_linear_available(), reason="this torch has no oneDNN linear")


def _tensors(shape, out_features=24, bias=True, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(*shape, generator=g, requires_grad=True)
    w = (0.1 * torch.randn(out_features, shape[-1], generator=g)).requires_grad_()
    b = torch.randn(out_features, generator=g).requires_grad_() if bias else None
    return x, w, b


@needs_onednn
@pytest.mark.parametrize("shape", [(7, 16), (3, 5, 16)])
@pytest.mark.parametrize("bias", [True, False])
def test_linear_and_its_gradients_equal_f_linear(shape, bias, monkeypatch):
    pointwise_calls = []
    real = _linear._OneDnnLinear.apply
    monkeypatch.setattr(_linear._OneDnnLinear, "apply", lambda *a: pointwise_calls.append(1) or real(*a))
    x, w, b = _tensors(shape, bias=bias)
    grad_out = torch.randn(*shape[:-1], 24, generator=torch.Generator().manual_seed(1))
    out = _linear.linear(x, w, b)
    assert pointwise_calls  # the oneDNN path ran, not a fallback
    grads = torch.autograd.grad(out, [t for t in (x, w, b) if t is not None], grad_out)
    ref = F.linear(x, w, b)
    ref_grads = torch.autograd.grad(ref, [t for t in (x, w, b) if t is not None], grad_out)
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)
    for got, want in zip(grads, ref_grads):
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


@needs_onednn
def test_gradient_reaches_a_non_contiguous_input_and_a_frozen_weight():
    x, w, b = _tensors((16, 16))
    w.requires_grad_(False)
    xt = x.t()  # non-contiguous
    out = _linear.linear(xt, w, b)
    (gx,) = torch.autograd.grad(out.square().sum(), [x])
    (want,) = torch.autograd.grad(F.linear(xt, w, b).square().sum(), [x])
    torch.testing.assert_close(gx, want, atol=1e-5, rtol=1e-5)


@needs_onednn
def test_fused_epilogues_equal_the_separate_ops():
    x, w, b = (t.detach() for t in _tensors((2, 9, 16)))
    other = torch.randn(2, 9, 24)
    with torch.no_grad():
        torch.testing.assert_close(_linear.linear_gelu(x, w, b), F.gelu(F.linear(x, w, b)), atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(_linear.linear_add(x, w, b, other), F.linear(x, w, b) + other,
                                   atol=1e-5, rtol=1e-5)


def test_fused_epilogues_step_aside_under_autograd_and_autocast():
    x, w, b = _tensors((4, 16))
    assert _linear.linear_gelu(x, w, b) is None  # autograd needs the pre-activation
    assert _linear.linear_add(x, w, b, torch.zeros(4, 24)) is None
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        assert _linear.linear_gelu(x, w, b) is None
        out = _linear.linear(x, w, b)  # F.linear under autocast: bf16 out
    assert out.dtype == torch.bfloat16


@needs_onednn
def test_bf16_inference_takes_onednn_with_its_epilogues_and_training_does_not(monkeypatch):
    """A model cast to bf16 (inference precision "bf16"): the three linears run oneDNN's op in
    bf16 and agree with F.linear computed in fp32 from the same bf16 numbers; under autograd, and
    where oneDNN's bf16 op is missing, they step aside."""
    if not _linear._onednn_bf16_linear_works():
        pytest.skip("oneDNN's bf16 linear does not run on this CPU")
    x, w, b = (t.detach().bfloat16() for t in _tensors((2, 9, 16)))
    other = torch.randn(2, 9, 24).bfloat16()
    calls = []
    real = torch.ops.mkldnn._linear_pointwise
    with torch.no_grad():
        ref = F.linear(x.float(), w.float(), b.float())
        got = {"linear": _linear.linear(x, w, b), "gelu": _linear.linear_gelu(x, w, b),
               "add": _linear.linear_add(x, w, b, other)}
        want = {"linear": ref, "gelu": F.gelu(ref), "add": ref + other.float()}
        for name in got:
            assert got[name].dtype == torch.bfloat16, name
            torch.testing.assert_close(got[name].float(), want[name], atol=3e-2, rtol=2e-2, msg=name)
        assert _linear.linear_add(x, w, b, other.float()) is None  # mixed dtypes: the caller adds
    monkeypatch.setattr(torch.ops.mkldnn, "_linear_pointwise", lambda *a: calls.append(a) or real(*a))
    xg, wg = x.clone().requires_grad_(), w.clone().requires_grad_()
    out = _linear.linear(xg, wg, b)  # autograd: F.linear, whose bf16 backward torch owns
    out.float().sum().backward()
    assert not calls and xg.grad is not None and _linear.linear_gelu(xg, wg, b) is None
    monkeypatch.setattr(_linear, "_onednn_bf16_linear_works", lambda: False)
    with torch.no_grad():
        assert _linear.linear_gelu(x, w, b) is None and _linear.linear_add(x, w, b, other) is None
        assert torch.equal(_linear.linear(x, w, b), F.linear(x, w, b))


def test_mismatched_shapes_get_f_linears_error():
    x, w, b = _tensors((4, 16))
    with pytest.raises(RuntimeError, match="cannot be multiplied"):
        _linear.linear(x[:, :10], w, b)


def test_without_the_op_it_is_f_linear(monkeypatch):
    monkeypatch.setattr(_linear, "_onednn_linear_works", lambda: False)
    x, w, b = _tensors((4, 16))
    with torch.no_grad():
        assert _linear.linear_gelu(x, w, b) is None
        assert torch.equal(_linear.linear(x, w, b), F.linear(x, w, b))


def test_the_environment_switch_and_the_cache_bound(monkeypatch):
    monkeypatch.setenv("NLP_ONEDNN_LINEAR", "0")
    assert _linear.onednn_linear_available() is False
    monkeypatch.delenv("ONEDNN_PRIMITIVE_CACHE_CAPACITY", raising=False)
    _linear.limit_onednn_cache()
    assert int(os.environ["ONEDNN_PRIMITIVE_CACHE_CAPACITY"]) == _linear.ONEDNN_CACHE_ENTRIES
