"""torch.ops.nlp.self_attention: the op a layer's attention becomes under a fused ONNX export."""

from __future__ import annotations

import torch

from nlp.models import ErnieModel, preset_config
from nlp.models.ernie import _build_attention
from nlp.models.export_attention import fused_attention_enabled, fused_attention_export


def test_the_op_computes_what_the_layer_computes_at_every_real_position():
    torch.manual_seed(0)
    config = preset_config("ernie-3.0-tiny-pico-v2-zh", num_hidden_layers=1, hidden_size=64,
                           num_attention_heads=4, intermediate_size=128)
    layer = ErnieModel(config).eval().layers[0]
    x = torch.randn(3, 7, 64)
    mask = torch.tensor([[1] * 7, [1] * 4 + [0] * 3, [1] * 2 + [0] * 5])
    with torch.no_grad():
        want = layer.attend(x, _build_attention(mask, None, "cpu", x.dtype))
        got = torch.ops.nlp.self_attention(x, layer.qkv.weight, layer.qkv.bias, mask, layer.num_heads)
    assert got.shape == want.shape == (3, 7, 64)
    real = mask.bool()
    assert torch.allclose(got[real], want[real], atol=1e-5)
    # padded keys are ignored: changing a padded token's hidden state leaves the real rows alone
    x2 = x.clone()
    x2[1, 5] += 10.0
    with torch.no_grad():
        again = torch.ops.nlp.self_attention(x2, layer.qkv.weight, layer.qkv.bias, mask, layer.num_heads)
    assert torch.allclose(again[1, :4], got[1, :4], atol=1e-6)


def test_fused_attention_is_only_on_under_export_inside_the_context():
    assert not fused_attention_enabled()
    with fused_attention_export():
        assert not fused_attention_enabled()  # eager code inside the block: unchanged
    assert not fused_attention_enabled()
