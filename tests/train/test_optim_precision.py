"""AdamW parameter groups, lr schedules, and the mixed-precision / device choices."""

import math

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


def test_auto_precision_on_cpu_needs_amx(monkeypatch):
    monkeypatch.setattr(precision, "cpu_has_amx", lambda: False)
    assert precision.resolve_mixed_precision("auto", use_cuda=False) == "no"
    monkeypatch.setattr(precision, "cpu_has_amx", lambda: True)
    assert precision.resolve_mixed_precision("auto", use_cuda=False) == "bf16"
    assert precision.resolve_mixed_precision("bf16", use_cuda=False) == "bf16"


def test_this_machine_has_no_amx_so_auto_is_fp32():
    flags = open("/proc/cpuinfo").read().split()
    if "amx_bf16" in flags:
        pytest.skip("this CPU has AMX")
    assert precision.resolve_mixed_precision("auto", use_cuda=False) == "no"


def test_fp16_on_cpu_is_refused():
    with pytest.raises(ConfigError, match="fp16.*needs a CUDA GPU"):
        precision.resolve_mixed_precision("fp16", use_cuda=False)


def test_fsdp_and_deepspeed_are_refused_on_cpu(monkeypatch):
    monkeypatch.setenv("ACCELERATE_USE_FSDP", "true")
    with pytest.raises(ConfigError, match="FSDP .* no CUDA GPU"):
        precision.check_distributed_backend(use_cuda=False)
    monkeypatch.delenv("ACCELERATE_USE_FSDP")
    monkeypatch.setenv("ACCELERATE_USE_DEEPSPEED", "1")
    with pytest.raises(ConfigError, match="DeepSpeed"):
        precision.check_distributed_backend(use_cuda=False)
    precision.check_distributed_backend(use_cuda=True)  # fine on GPU
