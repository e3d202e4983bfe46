"""The fast CPU dropout: drop rate, scaling, gradients, reproducibility, and the attention path."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from nlp.models import Dropout
from nlp.models.dropout import dropout, keep_mask, residual_dropout
from nlp.models.fast_paths import _attention_with_dropout


@pytest.mark.parametrize("p", [0.05, 0.1, 0.5, 0.9])
def test_keep_mask_keeps_one_minus_p_in_every_lane(p):
    torch.manual_seed(0)
    n = 400_000
    keep = keep_mask((n,), p)
    assert keep.dtype == torch.bool and keep.shape == (n,)
    # 4 sigma of a binomial proportion over n/4 draws, in each of the four 16-bit lanes of a word
    tol = 4 * (p * (1 - p) / (n / 4)) ** 0.5
    for lane in range(4):
        assert abs(1 - keep[lane::4].float().mean().item() - p) < tol
    # neighbours are independent: P(both kept) = (1-p)^2
    both = (keep[:-1] & keep[1:]).float().mean().item()
    assert abs(both - (1 - p) ** 2) < 4 * ((1 - p) ** 2 / n) ** 0.5 + 1e-3


def test_keep_mask_odd_sizes_and_shapes():
    for shape in [(1,), (3,), (5, 7), (2, 3, 5)]:
        assert keep_mask(shape, 0.3).shape == shape
    assert keep_mask((8,), 0.0).all()
    with pytest.raises(ValueError, match=r"in \[0, 1\]"):
        keep_mask((4,), 1.5)


def test_dropout_scales_kept_values_and_zeroes_the_rest():
    torch.manual_seed(1)
    x = torch.rand(64, 128) + 0.5
    y = dropout(x, 0.25)
    kept = y != 0
    torch.testing.assert_close(y[kept], x[kept] / 0.75)
    assert abs(1 - kept.float().mean().item() - 0.25) < 0.02
    assert dropout(x, 0.25, training=False) is x and dropout(x, 0.0) is x
    assert torch.equal(dropout(x, 1.0), torch.zeros_like(x))
    with pytest.raises(ValueError):
        dropout(x, -0.1)


def test_dropout_gradient_is_the_mask_times_the_scale():
    torch.manual_seed(2)
    x = torch.randn(32, 16, requires_grad=True)
    y = dropout(x, 0.3)
    y.backward(torch.ones_like(y))
    expected = (y.detach() != 0).float() / 0.7
    torch.testing.assert_close(x.grad, expected)


def test_same_seed_same_mask_and_module_form():
    x = torch.randn(10, 33)
    torch.manual_seed(3)
    a = dropout(x, 0.1)
    torch.manual_seed(3)
    b = dropout(x, 0.1)
    assert torch.equal(a, b)
    m = Dropout(0.1)
    torch.manual_seed(3)
    assert torch.equal(m(x), a)
    assert torch.equal(m.eval()(x), x) and "p=0.1" in repr(m)


def test_residual_dropout_equals_residual_plus_dropout():
    r, x = torch.randn(4, 9, 16), torch.randn(4, 9, 16, requires_grad=True)
    torch.manual_seed(4)
    fused = residual_dropout(r, x, 0.2)
    torch.manual_seed(4)
    plain = r + dropout(x, 0.2)
    torch.testing.assert_close(fused, plain)
    fused.sum().backward()
    torch.testing.assert_close(x.grad, (plain - r != 0).float() / 0.8)
    torch.testing.assert_close(residual_dropout(r, x, 0.2, training=False), r + x)


def _qkv(B=2, nh=3, T=7, hd=8):
    torch.manual_seed(5)
    return [torch.randn(B, nh, T, hd, requires_grad=True) for _ in range(3)]


@pytest.mark.parametrize("mask_kind", [None, "padding", "block"])
def test_attention_path_equals_sdpa_when_nothing_is_dropped(mask_kind):
    """p below 2**-17 drops nothing: the manual path must then equal SDPA, forward and backward."""
    q, k, v = _qkv()
    mask = None
    if mask_kind == "padding":
        mask = torch.ones(2, 1, 1, 7, dtype=torch.bool)
        mask[1, ..., 5:] = False
    elif mask_kind == "block":
        ids = torch.tensor([[1, 1, 1, 2, 2, 0, 0], [1, 1, 1, 1, 1, 1, 2]])
        mask = ids[:, None, :, None] == ids[:, None, None, :]
    ours = _attention_with_dropout(q, k, v, mask, 1e-9)
    grads = torch.autograd.grad(ours.sum(), (q, k, v))
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    ref_grads = torch.autograd.grad(ref.sum(), (q, k, v))
    torch.testing.assert_close(ours, ref, atol=1e-5, rtol=1e-5)
    for a, b in zip(grads, ref_grads):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


def test_attention_dropout_is_unbiased():
    """E[dropout(softmax) @ v] = softmax @ v: the mean over many draws approaches SDPA's output."""
    q, k, v = (t.detach() for t in _qkv(B=1, nh=2, T=6, hd=4))
    ref = F.scaled_dot_product_attention(q, k, v)
    torch.manual_seed(6)
    draws = torch.stack([_attention_with_dropout(q, k, v, None, 0.1) for _ in range(4000)])
    assert not torch.allclose(draws[0], ref, atol=1e-3)  # a single draw does drop
    torch.testing.assert_close(draws.mean(0), ref, atol=0.03, rtol=0)
