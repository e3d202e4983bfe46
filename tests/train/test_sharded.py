"""`train.distributed.strategy=fsdp` (issue 26): `nlp finetune` under torchrun on 2 gloo CPU
processes, sharded by FSDP2, against one process over the same global batches.

A tiny random 2-layer model on the shipped ernie-tiny-zh tokenizer, 4 steps of 8 reviews,
dropout off, fp32 unless said: per-step losses and final parameters equal one process's
(relative <= 1e-6; FSDP reduce-scatters where one process sums, so the last bits differ); every
parameter is a DTensor shard during training; checkpoints are DCP shards that resume exactly
after SIGTERM and after kill -9 in the middle of a save, on 2 processes and on 1. Every launch
must exit 0 (or 128+15 after SIGTERM): an abort at exit fails the test.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from nlp._common import ConfigError
from nlp.train import TrainingInterrupted
from nlp.train.sharding import check_strategy

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import _toy  # noqa: E402
from _sharded_launch import (  # noqa: E402  (shared with tests/train/test_zero.py)
    REPO,
    TIMEOUT,
    assert_same_weights as _assert_same_weights,
    env as _env,
    free_port as _free_port,
    grad_norms as _grad_norms,
    kill_during_save as _kill_during_save,
    losses as _losses,
    overrides as _overrides,
    reference_run,
    run as _run,
    stop_after as _stop_after,
    weights as _weights,
)


def test_strategy_settings_refuse_what_cannot_work():
    cpu = torch.device("cpu")
    with pytest.raises(ConfigError, match="cpu_offload=true .* on the CPU.*cpu_offload=false"):
        check_strategy("fsdp", precision="no", cpu_offload=True, device=cpu)
    with pytest.raises(ConfigError, match="strategy=fsdp with mixed_precision=fp16"):
        check_strategy("fsdp", precision="fp16", cpu_offload=False, device=torch.device("cuda"))
    with pytest.raises(ConfigError, match="cpu_offload=true applies to strategy=fsdp only"):
        check_strategy("ddp", precision="no", cpu_offload=True, device=cpu)
    check_strategy("fsdp", precision="bf16", cpu_offload=False, device=cpu)
    with pytest.raises(ConfigError, match="distributed.strategy"):
        _toy.settings("x", distributed__strategy="zero3")


def test_one_process_fsdp_writes_sharded_checkpoints_and_resumes_exactly(tmp_path):
    """One process: nothing to shard, but the checkpoints are DCP's (so that the run can move to
    N processes); an interrupted run resumes to the losses and best model of an unbroken one."""
    stopped = _toy.make_trainer(tmp_path / "run", callbacks=[_toy.StopAt(5)], distributed__strategy="fsdp")
    with pytest.raises(TrainingInterrupted, match="at step 5/12"):
        stopped.train()
    ckpt = tmp_path / "run" / "checkpoints" / "step-00000005"
    assert (ckpt / "sharded" / ".metadata").is_file() and not (ckpt / "model.safetensors").exists()
    resumed = _toy.make_trainer(tmp_path / "run", distributed__strategy="fsdp").train()
    unbroken = _toy.make_trainer(tmp_path / "ref").train()  # ddp, the old format
    assert resumed.best_step == unbroken.best_step
    assert _toy.losses(tmp_path / "run") == pytest.approx(_toy.losses(tmp_path / "ref"), rel=1e-6, abs=0)
    got, want = (load_file(str(r.model_dir / "model.safetensors")) for r in (resumed, unbroken))
    _assert_same_weights(got, want, rel=1e-6)  # the best checkpoint's weights, loaded from DCP shards
    with pytest.raises(ConfigError, match="written by train.distributed.strategy=ddp .* strategy=fsdp"):
        _toy.make_trainer(tmp_path / "ref", distributed__strategy="fsdp", max_steps=20).train()


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """One plain process's run per batching and settings (_sharded_launch.reference_run: run once
    per session, shared with the other sharded strategy's tests)."""
    return functools.partial(reference_run, tmp_path_factory)


@pytest.mark.parametrize("batching, same, extra", [
    # an evaluation (and a sharded checkpoint, rotated) after every step, between training steps
    ("dynamic", (), ("train.eval.every_steps=1", "train.checkpoint.load_best_at_end=false")),
    ("length_grouped", (), ("train.gradient_checkpointing=true", "train.distributed.reshard_after_forward=false")),
    # accumulation over 2 micro-batches; clipped at 0.05 by the global norm (2 of the 4 steps here)
    ("packed", ("train.grad_accum_steps=2", "train.optim.max_grad_norm=0.05"), ()),
])
def test_fsdp_on_two_processes_trains_like_one(tmp_path, reference, batching, same, extra):
    """`same`: settings of both runs; `extra`: of the sharded run only (they change no number)."""
    out = tmp_path / "fsdp"
    _run(tmp_path / "probes", 2, _overrides(out, batching, *same, "train.distributed.strategy=fsdp", *extra))
    one = reference(batching, *same)
    want, got = _losses(one), _losses(out)
    assert sorted(got) == [1, 2, 3, 4] and len(set(want.values())) > 1  # the model did train
    assert got == pytest.approx(want, rel=1e-6, abs=0)
    # clipping saw the global norm, over both processes' shards
    assert _grad_norms(out) == pytest.approx(_grad_norms(one), rel=1e-5, abs=0)
    _assert_same_weights(_weights(out), _weights(one), rel=1e-6)

    for rank in (0, 1):  # every parameter was a shard, half of it on each process
        probe = json.loads((tmp_path / "probes" / f"rank{rank}.json").read_text())
        assert probe["processes"] == 2
        params = probe["params"]
        layers = [n for n in params if ".layers." in n]
        assert {n.split(".layers.")[1].split(".")[0] for n in layers} == {"0", "1"}
        whole = [n for n, p in params.items() if not p["dtensor"] or p["local"] * 2 != p["global"]]
        assert not whole, f"left whole on rank {rank}: {whole}"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["processes"] == 2 and summary["status"] == "finished"
    results, want_results = (json.loads((d / "results.json").read_text()) for d in (out, one))
    for role in ("dev", "test"):  # scored by the sharded model (dev: uneven shares)
        assert results[role] == pytest.approx(want_results[role], rel=1e-5)
    transformers = pytest.importorskip("transformers")
    hf = transformers.AutoModelForSequenceClassification.from_pretrained(out / "model")  # gathered on rank 0
    torch.testing.assert_close(hf.classifier.weight.detach(), _weights(one)["classifier.weight"], rtol=1e-4, atol=1e-5)
    assert (out / "checkpoints" / "step-00000004" / "sharded" / ".metadata").is_file()
    assert not (out / "checkpoints" / "step-00000004" / "model.safetensors").exists()


def test_fsdp_bf16_follows_fp32(tmp_path, reference):
    """bf16 parameters gathered, fp32 gradient reduction (MixedPrecisionPolicy). On the recipe's
    length-grouped batches; dynamic batches here start with a near-zero gradient, where AdamW's
    first update follows the rounding's signs and one-process bf16 autocast strays ~2% too."""
    out = tmp_path / "bf16"
    _run(tmp_path / "probes", 2, _overrides(out, "length_grouped", "train.distributed.strategy=fsdp",
                                             "train.mixed_precision=bf16"))
    want, got = _losses(reference("length_grouped")), _losses(out)
    assert sorted(got) == [1, 2, 3, 4]
    assert got == pytest.approx(want, rel=1e-3, abs=0)
    assert got != pytest.approx(want, rel=1e-6, abs=0)  # it did run in bf16
    assert all(v.dtype == torch.float32 for v in _weights(out).values())  # the export is fp32


def test_fsdp_resumes_exactly_after_sigterm_and_kill_9_mid_save_on_2_and_on_1_process(tmp_path, reference):
    out, probes = tmp_path / "run", tmp_path / "probes"
    overrides = _overrides(out, "dynamic", "train.distributed.strategy=fsdp", "train.checkpoint.every_steps=2")

    # 1. SIGTERM to both processes after step 1: each finishes the step, a checkpoint, stops.
    _, err = _stop_after(probes, overrides, 1, 2)
    assert "stopped by signal 15 at step 1/4" in err, err[-4000:]
    assert [p.name for p in sorted((out / "checkpoints").glob("step-*"))] == ["step-00000001"]
    on_one = tmp_path / "on-one"
    shutil.copytree(out, on_one)

    # 2. Resumed on 2 processes; killed (-9) while writing the checkpoint of step 2.
    _kill_during_save(probes, overrides, 2)
    assert (out / "checkpoints" / ".tmp-step-00000002" / "sharded").is_dir()  # half-written
    assert [p.name for p in sorted((out / "checkpoints").glob("step-*"))] == ["step-00000001"]

    # 3. The same command again: resumes step 1's checkpoint and finishes like an unbroken run.
    _run(probes, 2, overrides)
    want = _losses(reference("dynamic"))
    assert _losses(out) == pytest.approx(want, rel=1e-6, abs=0)
    _assert_same_weights(_weights(out), _weights(reference("dynamic")), rel=1e-6)

    # 4. The 2-process checkpoint of step 1 resumed on one process (2 -> 1), which stops after
    # step 2 (SIGTERM), leaving a checkpoint written by one process; resumed on 2 (1 -> 2).
    overrides = _overrides(on_one, "dynamic", "train.distributed.strategy=fsdp", "train.checkpoint.every_steps=2")
    rc, err = _stop_after(probes / "one", overrides, 2, 1)
    assert rc == 128 + signal.SIGTERM and "stopped by signal 15 at step 2/4" in err, err[-4000:]
    assert "saved with 2 processes on 1" in err
    _run(probes / "two", 2, overrides)
    assert _losses(on_one) == pytest.approx(want, rel=1e-6, abs=0)
    _assert_same_weights(_weights(on_one), _weights(reference("dynamic")), rel=1e-6)


@pytest.mark.parametrize("strategy", ["ddp", "fsdp"])
def test_two_nodes_on_localhost_train_like_one_process(tmp_path, reference, strategy):
    """Two "machines" (torchrun --nnodes 2, one process each, rendezvous on 127.0.0.1), the real
    `nlp finetune`: the multi-node form of docs/training.md."""
    out, port = tmp_path / "run", _free_port()
    nodes = [subprocess.Popen(
        [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--node-rank", str(rank),
         "--nproc-per-node", "1", "--rdzv-endpoint", f"127.0.0.1:{port}", "-m", "nlp", "finetune",
         "recipes/sentiment-reviews.yaml", *_overrides(out, "dynamic", f"train.distributed.strategy={strategy}")],
        cwd=REPO, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
        for rank in (0, 1)]
    try:
        done = [(node.communicate(timeout=TIMEOUT), node.returncode) for node in nodes]
    finally:
        for node in nodes:
            if node.poll() is None:
                os.killpg(node.pid, signal.SIGKILL)
    for (_, err), rc in done:
        assert rc == 0 and "terminate called" not in err, err[-4000:]
    assert done[0][0][0].count("run: ") == 1 and "run: " not in done[1][0][0]  # one report, node 0's
    summary = json.loads((out / "summary.json").read_text())
    assert summary["processes"] == 2 and summary["status"] == "finished"
    assert _losses(out) == pytest.approx(_losses(reference("dynamic")), rel=1e-6, abs=0)
    _assert_same_weights(_weights(out), _weights(reference("dynamic")), rel=1e-6)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.device_count() < 2, reason="needs 2 CUDA GPUs")
def test_fsdp_on_two_gpus_trains_like_one(tmp_path):
    """The same comparison over NCCL, one process per GPU, bf16 policy against fp32 on one GPU."""
    one, two = tmp_path / "one", tmp_path / "two"
    _run(tmp_path / "p1", 1, _overrides(one, "length_grouped"), gpus=True)
    _run(tmp_path / "p2", 2, _overrides(two, "length_grouped", "train.distributed.strategy=fsdp"), gpus=True)
    assert _losses(two) == pytest.approx(_losses(one), rel=1e-5, abs=0)
    _assert_same_weights(_weights(two), _weights(one), rel=1e-5)
    bf16 = tmp_path / "bf16"
    _run(tmp_path / "p3", 2, _overrides(bf16, "length_grouped", "train.distributed.strategy=fsdp",
                                         "train.mixed_precision=bf16"), gpus=True)
    assert _losses(bf16) == pytest.approx(_losses(one), rel=1e-3, abs=0)
