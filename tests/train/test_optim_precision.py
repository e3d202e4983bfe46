"""AdamW parameter groups, lr schedules, and the mixed-precision / device choices."""

import math
import os

import pytest
import torch
from torch import nn

from nlp._common import ConfigError
from nlp.train import OptimSettings, ScheduleSettings
from nlp.train import precision
from nlp.train.optim import build_optimizer, build_scheduler, param_groups


def test_no_weight_decay_on_biases_and_layernorm():
    model = nn.Sequential(nn.Embedding(10, 4), nn.Linear(4, 4), nn.LayerNorm(4))
    decay, plain = param_groups(model, 0.1)
    assert decay["weight_decay"] == 0.1 and plain["weight_decay"] == 0.0
    ids = lambda ps: {id(p) for p in ps}  # noqa: E731
    assert ids(decay["params"]) == {id(model[0].weight), id(model[1].weight)}
    assert ids(plain["params"]) == {id(model[1].bias), id(model[2].weight), id(model[2].bias)}
    opt = build_optimizer(model, OptimSettings(lr=1e-3, impl="auto"))
    assert opt.defaults["fused"] is True  # CPU has a fused AdamW kernel: 3-5x faster steps
    assert build_optimizer(model, OptimSettings(lr=1e-3, impl="foreach")).defaults["foreach"] is True


@pytest.mark.parametrize("name", ["linear", "cosine", "constant"])
def test_schedules_warm_up_then_decay(name):
    p = nn.Parameter(torch.zeros(1))
    opt = torch.optim.AdamW([p], lr=1.0)
    sched = build_scheduler(opt, ScheduleSettings(name=name, warmup_steps=4), total_steps=20)
    lrs = []
    for _ in range(20):
        lrs.append(sched.get_last_lr()[0])
        opt.step()
        sched.step()
    assert lrs[:4] == sorted(lrs[:4]) and 0 < lrs[0] < lrs[3] < 1.0
    assert lrs[4] == pytest.approx(1.0)
    if name == "constant":
        assert lrs[-1] == 1.0
    else:
        assert lrs[-1] < 0.1 and lrs[4:] == sorted(lrs[4:], reverse=True)
    if name == "cosine":  # half-way through the decay the cosine is at one half
        assert lrs[12] == pytest.approx(0.5 * (1 + math.cos(math.pi * 8 / 16)))


def test_auto_precision_on_cpu_needs_native_bf16(monkeypatch):
    monkeypatch.setattr(precision, "cpu_has_fast_bf16", lambda: False)
    assert precision.resolve_mixed_precision("auto", use_cuda=False) == "no"
    monkeypatch.setattr(precision, "cpu_has_fast_bf16", lambda: True)
    assert precision.resolve_mixed_precision("auto", use_cuda=False) == "bf16"
    assert precision.resolve_mixed_precision("no", use_cuda=False) == "no"


def test_bf16_flags_are_read_from_cpuinfo():
    zen4 = "flags\t\t: fpu avx2 avx512f avx512_bf16 avx512_vnni\n"
    sapphire_rapids = "flags\t\t: fpu avx2 avx512f avx512_bf16 amx_bf16 amx_tile\n"
    skylake = "flags\t\t: fpu avx2 avx512f avx512bw avx512vl\n"
    assert precision.cpu_bf16_flags(zen4) == ["avx512_bf16"]
    assert precision.cpu_bf16_flags(sapphire_rapids) == ["avx512_bf16", "amx_bf16"]
    assert precision.cpu_bf16_flags(skylake) == []  # bf16 emulated there: auto stays fp32


def test_auto_on_this_machine_follows_its_cpu_flags():
    fast = bool(precision.cpu_bf16_flags()) and torch.backends.mkldnn.is_available()
    assert precision.resolve_mixed_precision("auto", use_cuda=False) == ("bf16" if fast else "no")


def test_bf16_training_and_evaluation_run_on_cpu():
    """Under CPU autocast the encoder's fused fp32 paths step aside (in-place GEMM into the
    residual, in-place GELU) and attention runs in fp32: training and evaluation both work and
    agree with fp32 to bf16 precision."""
    from nlp.models import preset_config
    from nlp.tasks import ErnieForSequenceClassification

    config = preset_config("ernie-3.0-tiny-pico-v2-zh", num_labels=2, num_hidden_layers=2, hidden_size=64,
                           num_attention_heads=2, intermediate_size=128, vocab_size=300)
    torch.manual_seed(0)
    model = ErnieForSequenceClassification(config)
    ids = torch.randint(1, 300, (4, 12))
    mask = torch.ones_like(ids)
    mask[1:, 8:] = 0
    labels = torch.tensor([0, 1, 1, 0])
    model.eval()
    with torch.no_grad():
        ref = model(ids, attention_mask=mask).logits
        with torch.autocast("cpu", dtype=torch.bfloat16):
            low = model(ids, attention_mask=mask).logits
    assert low.dtype == torch.bfloat16 and torch.allclose(low.float(), ref, atol=3e-2)
    model.train()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = model(ids, attention_mask=mask, labels=labels).loss
    loss.backward()
    assert loss.dtype == torch.float32 and all(p.grad.dtype == torch.float32 for p in model.parameters()
                                               if p.grad is not None)


def test_bf16_on_cpu_bounds_the_onednn_cache(monkeypatch):
    monkeypatch.delenv("ONEDNN_PRIMITIVE_CACHE_CAPACITY", raising=False)
    precision.limit_onednn_cache()
    assert os.environ["ONEDNN_PRIMITIVE_CACHE_CAPACITY"] == str(precision.ONEDNN_CACHE_ENTRIES)
    monkeypatch.setenv("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "300")  # the user's choice is kept
    precision.limit_onednn_cache()
    assert os.environ["ONEDNN_PRIMITIVE_CACHE_CAPACITY"] == "300"


def test_fp16_on_cpu_is_refused():
    with pytest.raises(ConfigError, match="fp16.*needs a CUDA GPU"):
        precision.resolve_mixed_precision("fp16", use_cuda=False)


def test_fsdp_and_deepspeed_are_refused_on_cpu(monkeypatch):
    monkeypatch.setenv("ACCELERATE_USE_FSDP", "true")
    with pytest.raises(ConfigError, match="FSDP .* no CUDA GPU"):
        precision.check_distributed_backend(use_cuda=False)
    monkeypatch.delenv("ACCELERATE_USE_FSDP")
    monkeypatch.setenv("ACCELERATE_USE_DEEPSPEED", "1")
    with pytest.raises(ConfigError, match="DeepSpeed was selected .* or =deepspeed"):
        precision.check_distributed_backend(use_cuda=False)
    precision.check_distributed_backend(use_cuda=True)  # fine on GPU
