"""Int8 inference of the encoder's linear layers (nlp/models/int8_linear.py, precision "int8").

The packed int8 copies serve CPU inference only: each token is quantized on its own scale, so a
text's outputs do not depend on its batch mates; training, autograd, a weight changed after
packing, and every other layer (embeddings, heads) keep fp32.
"""

from __future__ import annotations

import pytest
import torch

from nlp.models import ErnieConfig, fast_paths, prepare_for_inference
from nlp.models.int8_linear import INT8_ATTRIBUTE, int8_available, int8_linear, quantize_linears
from nlp.tasks import ErnieForTokenClassification

pytestmark = pytest.mark.skipif(not int8_available(), reason="this torch build has no fbgemm int8 kernels")


def _model(seed: int = 0) -> ErnieForTokenClassification:
    torch.manual_seed(seed)
    config = ErnieConfig.from_dict(dict(vocab_size=120, hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                                        intermediate_size=128, max_position_embeddings=64, hidden_dropout_prob=0.0,
                                        attention_probs_dropout_prob=0.0, type_vocab_size=2),
                                   id2label={0: "O", 1: "B-PER", 2: "I-PER"})
    return ErnieForTokenClassification(config).eval()


def _batch(rows: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(map(len, rows))
    ids = torch.tensor([r + [0] * (width - len(r)) for r in rows])
    return ids, (ids != 0).long()


def test_the_encoder_linears_are_packed_and_agree_with_fp32_to_int8_rounding():
    model = _model()
    ids, mask = _batch([[2, 17, 40, 33, 91, 3], [2, 5, 8, 3]])
    with torch.inference_mode():
        fp32 = model(input_ids=ids, attention_mask=mask).logits
    assert quantize_linears(model) == 2 * 4  # qkv, attention output, feed-forward in and out, per layer
    assert not hasattr(model.classifier.weight, INT8_ATTRIBUTE)  # the head stays fp32
    with torch.inference_mode():
        int8 = model(input_ids=ids, attention_mask=mask).logits
    assert not torch.equal(int8, fp32)  # the int8 path ran ...
    torch.testing.assert_close(int8, fp32, atol=0.05, rtol=0.05)  # ... and rounds, no more
    assert (int8.argmax(-1) == fp32.argmax(-1)).float().mean() > 0.9


def test_a_texts_outputs_do_not_depend_on_its_batch_mates():
    """With one activation range per call (fbgemm's own), the louder row would set the text's
    quantization steps; on its own scale per token it does not. Both rows have one length, so the
    fp32 parts (attention, LayerNorm) compute the text's rows exactly as alone: float rounding of
    another padded length can still move an int8 result by a step (docs/serving.md)."""
    model = _model()
    quantize_linears(model)
    text = [2, 17, 40, 33, 91, 3]
    loud = [2, 7, 8, 9, 10, 3]  # other tokens, other activation ranges
    with torch.inference_mode():
        alone = model(*_batch([text])).logits[0]
        with_mates = model(*_batch([text, loud])).logits[0]
    torch.testing.assert_close(with_mates, alone, atol=1e-6, rtol=1e-6)


def test_training_autograd_and_a_changed_weight_run_fp32():
    model = _model()
    layer = model.backbone.layers[0].ffn_in
    x = torch.randn(3, 5, layer.in_features)
    quantize_linears(model)
    with torch.inference_mode():
        assert int8_linear(x, layer.weight) is not None
    xg = x.clone().requires_grad_(True)
    assert int8_linear(xg, layer.weight) is None  # autograd: fp32, so gradients are exact
    assert int8_linear(x.to(torch.bfloat16), layer.weight) is None  # another dtype: its own path
    with torch.no_grad():
        layer.weight.add_(0.5)  # what an optimizer step does: the packed copy is stale now
    with torch.inference_mode():
        assert int8_linear(x, layer.weight) is None
        torch.testing.assert_close(fast_paths.TorchOps().linear(x, layer.weight, layer.bias),
                                   torch.nn.functional.linear(x, layer.weight, layer.bias))


def test_both_kernel_sets_run_the_packed_copies():
    model = _model()
    ids, mask = _batch([[2, 17, 40, 33, 91, 3]])
    outs = []
    for ops in (fast_paths.TorchOps(), fast_paths.select_ops()):
        for layer in model.backbone.layers:
            layer.ops = ops
        quantize_linears(model)
        with torch.inference_mode():
            outs.append(model(input_ids=ids, attention_mask=mask).logits)
    torch.testing.assert_close(outs[0], outs[1], atol=1e-4, rtol=1e-4)


def test_a_model_declaring_int8_runs_in_it_unless_told_otherwise(monkeypatch):
    from nlp.models import precision as precision_module

    model = _model()
    model.config.extra["inference_precision"] = "int8"
    assert prepare_for_inference(model, "cpu", None) == "int8"
    assert hasattr(model.backbone.layers[0].qkv.weight, INT8_ATTRIBUTE)
    assert prepare_for_inference(_declaring("int8"), "cpu", "fp32") == "fp32"
    monkeypatch.setattr(precision_module, "cpu_has_fast_bf16", lambda: False)
    assert prepare_for_inference(_declaring("int8"), "cpu", "auto") == "int8"
    assert prepare_for_inference(_model(), "cpu", "auto") == "fp32"  # no declaration: int8 only when asked
    assert prepare_for_inference(_model(), "cpu", "int8") == "int8"
    assert prepare_for_inference(_declaring("fp32"), "cpu", None) == "fp32"


def _declaring(precision: str) -> ErnieForTokenClassification:
    model = _model()
    model.config.extra["inference_precision"] = precision
    return model


def test_a_bad_declaration_or_device_is_refused_with_the_fix():
    from nlp._common import ConfigError
    from nlp.models import resolve_precision

    with pytest.raises(ConfigError, match=r"inference_precision: 'int4'; valid: fp32, int8 \(or leave the key out\)"):
        prepare_for_inference(_declaring("int4"), "cpu", None)
    with pytest.raises(ConfigError, match="precision 'int8' runs on the CPU .* on a GPU use bf16, fp16 or auto"):
        resolve_precision("int8", "cuda")
