"""What runs only on a CUDA GPU: the encoder and its attention kernels under CUDA autocast, fp16
loss scaling (a step with inf gradients is skipped, the schedule waits, the scale halves), bf16 /
fp16 fine-tuning, an exact resume with the CUDA RNG state, and the pipelines and the server on the
GPU agreeing with the CPU.

Skipped where there is no CUDA device (CI has none). On a machine with one: `pytest tests/gpu`.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch

import nlp

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "train"))
import _toy  # noqa: E402

ASSET = Path(nlp.__file__).parent / "assets"
TEXTS = ["这家酒店的服务非常好，房间也很干净。", "质量太差了，用了两天就坏了，再也不会买。",
         "新华社北京一月五日电，国务院总理李鹏今天在人民大会堂会见了来访的法国外长。", "好"]


def _tiny_classifier(seed: int = 0):
    from nlp.models import preset_config
    from nlp.tasks import ErnieForSequenceClassification

    config = preset_config("ernie-3.0-tiny-pico-v2-zh", num_labels=3, num_hidden_layers=2, hidden_size=64,
                           num_attention_heads=2, intermediate_size=128, vocab_size=300,
                           hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    torch.manual_seed(seed)
    return ErnieForSequenceClassification(config).eval()


def _padded_batch():
    torch.manual_seed(1)
    ids = torch.randint(1, 300, (4, 24))
    mask = torch.ones_like(ids)
    mask[1, 20:] = 0
    mask[2, 5:] = 0
    mask[3, 1:] = 0
    return ids, mask


@pytest.mark.parametrize("dtype, atol", [(None, 1e-4), (torch.bfloat16, 5e-2), (torch.float16, 1e-2)])
def test_the_encoder_on_cuda_agrees_with_the_cpu(dtype, atol):
    """fp32 on the GPU within 1e-4 of the CPU; under CUDA autocast (SDPA's flash / memory-efficient
    kernels) within the dtype's precision, padding rows included."""
    model = _tiny_classifier()
    ids, mask = _padded_batch()
    with torch.no_grad():
        ref = model(ids, attention_mask=mask).logits
        gpu = model.cuda()
        if dtype is None:
            out = gpu(ids.cuda(), attention_mask=mask.cuda()).logits
        else:
            with torch.autocast("cuda", dtype=dtype):
                out = gpu(ids.cuda(), attention_mask=mask.cuda()).logits
            assert out.dtype == dtype
    assert torch.isfinite(out).all()
    torch.testing.assert_close(out.float().cpu(), ref, rtol=0, atol=atol)


def test_packed_rows_on_cuda_equal_padded_rows():
    """Packed sequences (pack_ids: block-diagonal attention, or flash-attn's varlen kernel where it
    is installed) give each sequence the hidden states it has alone."""
    from nlp.models import ErnieModel, preset_config

    config = preset_config("ernie-3.0-mini-zh", num_hidden_layers=2, hidden_size=32, num_attention_heads=2,
                           intermediate_size=64, vocab_size=101, hidden_dropout_prob=0.0,
                           attention_probs_dropout_prob=0.0)
    torch.manual_seed(1)
    model = ErnieModel(config).eval().cuda()
    lengths = [[5, 3, 4], [7, 2]]
    ids = torch.zeros(2, 12, dtype=torch.long)
    pack = torch.zeros_like(ids)
    seqs = {}
    for r, row in enumerate(lengths):
        start = 0
        for k, n in enumerate(row):
            seqs[r, k] = torch.randint(1, 101, (n,))
            ids[r, start:start + n] = seqs[r, k]
            pack[r, start:start + n] = k + 1
            start += n
    with torch.no_grad():
        packed = model(ids.cuda(), pack_ids=pack.cuda()).last_hidden_state.cpu()
        for (r, k), seq in seqs.items():
            start = sum(lengths[r][:k])
            alone = model(seq[None].cuda()).last_hidden_state[0].cpu()
            torch.testing.assert_close(packed[r, start:start + len(seq)], alone, rtol=0, atol=1e-4)


def test_fp16_loss_scaling_skips_a_step_with_inf_gradients(tmp_path):
    """With fp16 the gradients are scaled; a step whose gradients overflow changes no weight, does
    not advance the lr schedule, and halves the scale; the run goes on and finishes."""
    trainer = _toy.make_trainer(tmp_path / "run", mixed_precision="fp16", max_steps=4, epochs=1,
                                eval__every_steps=None, optim__max_grad_norm=1.0)
    assert trainer.accelerator.device.type == "cuda" and trainer.accelerator.scaler is not None
    head = trainer.model.head.weight
    backward_calls = []

    def overflow_on_second_backward(grad):
        backward_calls.append(1)
        return grad * float("inf") if len(backward_calls) == 2 else grad

    head.register_hook(overflow_on_second_backward)
    seen: dict[int, tuple[torch.Tensor, float, float]] = {}

    class Watch:
        def on_step_end(self, tr, state):
            seen[state.step] = (tr.accelerator.unwrap_model(tr._model).head.weight.detach().clone(),
                                tr.scheduler.get_last_lr()[0], tr.accelerator.scaler.get_scale())

    trainer.callbacks.append(Watch())
    first_scale = trainer.accelerator.scaler.get_scale()
    result = trainer.train()
    assert result.status == "finished" and sorted(seen) == [1, 2, 3, 4]
    assert torch.equal(seen[2][0], seen[1][0])  # the overflowing step changed nothing
    assert not torch.equal(seen[3][0], seen[2][0])  # the next one did
    assert seen[2][1] == seen[1][1] and seen[3][1] != seen[2][1]  # the schedule waited one step
    assert seen[2][2] == first_scale / 2 and seen[1][2] == first_scale
    assert all(torch.isfinite(w).all() for w, _, _ in seen.values())
    losses = _toy.losses(tmp_path / "run")
    assert sorted(losses) == [1, 2, 3, 4] and all(v == v for v in losses.values())  # logged, finite loss


@pytest.mark.parametrize("precision", ["fp16", "bf16", "auto"])
def test_fine_tuning_a_recipe_on_cuda(precision, tmp_path):
    """`nlp finetune` of a real recipe (a tiny random model, a few steps) on the GPU in each
    precision: finite losses, the precision recorded, and the saved model gives on the CPU the
    logits it gives on the GPU in fp32."""
    from nlp.recipes import recipe_path
    from nlp.train.finetune import finetune
    from nlp.train.recipe import load_recipe

    out = tmp_path / "run"
    recipe = load_recipe(recipe_path("sentiment-reviews"), [
        "model.name=null", "model.preset=ernie-3.0-tiny-pico-v2-zh", "model.init=random",
        f"tokenizer.name={ASSET / 'ernie-tiny-zh'}", "model.config.num_hidden_layers=2",
        "model.config.hidden_size=64", "model.config.num_attention_heads=2", "model.config.intermediate_size=128",
        "data.max_length=64", "data.max_train_samples=96", "data.max_eval_samples=32", "train.max_steps=12",
        "train.data.batch_size=8", "train.eval.every_steps=6", f"train.mixed_precision={precision}",
        "train.log.every_steps=1", "train.log.progress_bar=false", "train.log.tensorboard=false",
        "train.log.plots=false", f"train.output_dir={out}"])
    result = finetune(recipe)
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    major, _ = torch.cuda.get_device_capability()
    expected = ("bf16" if major >= 8 else "fp16") if precision == "auto" else precision
    assert result.status == "finished" and summary["steps"] == 12
    assert summary["mixed_precision"] == expected
    assert summary["peak_memory_mb"] > 0  # read from the CUDA allocator
    losses = _toy.losses(out)
    assert len(losses) == 12 and all(torch.isfinite(torch.tensor(v)) for v in losses.values())
    assert 0.0 <= result.dev["accuracy"] <= 1.0
    model = nlp.AutoModelForSequenceClassification.from_pretrained(out / "model").eval()
    tok = nlp.AutoTokenizer.from_pretrained(out / "model")
    batch = tok(TEXTS, padding=True, return_tensors="pt")
    with torch.no_grad():
        cpu = model(**batch).logits
        gpu = model.cuda()(**{k: v.cuda() for k, v in batch.items()}).logits.cpu()
    torch.testing.assert_close(gpu, cpu, rtol=0, atol=1e-4)


def test_a_resumed_run_on_cuda_continues_the_same_loss_curve(tmp_path):
    """Dropout on: the CUDA RNG state is saved with the checkpoint and restored on resume."""
    kw = dict(epochs=2, data__batch_size=4, eval__every_steps=None, checkpoint__keep_last=1)
    full = _toy.make_trainer(tmp_path / "full", **kw)
    assert full.accelerator.device.type == "cuda"
    full.train()
    from nlp.train import TrainingInterrupted

    with pytest.raises(TrainingInterrupted):
        _toy.make_trainer(tmp_path / "run", callbacks=[_toy.StopAt(7)], **kw).train()
    state = torch.load(sorted((tmp_path / "run" / "checkpoints").glob("step-*"))[-1] / "rng_state_rank0.pt",
                       map_location="cpu", weights_only=True)
    assert "cuda" in state
    _toy.make_trainer(tmp_path / "run", model_seed=123, **kw).train()
    a, b = _toy.losses(tmp_path / "full"), _toy.losses(tmp_path / "run")
    assert sorted(a) == sorted(b) and len(a) == 24
    assert b == pytest.approx(a, rel=1e-5, abs=1e-6)


@pytest.mark.parametrize("task", ["sentiment-analysis", "ner", "lexical-analysis"])
def test_the_shipped_pipelines_on_cuda_agree_with_the_cpu(task):
    cpu = nlp.pipeline(task, device=-1)(TEXTS)
    gpu = nlp.pipeline(task, device=0)
    assert gpu.device.type == "cuda" and next(gpu.model.parameters()).is_cuda
    out = gpu(TEXTS)
    if task == "sentiment-analysis":
        assert [o[0]["label"] for o in out] == [o[0]["label"] for o in cpu]
        assert [o[0]["score"] for o in out] == pytest.approx([o[0]["score"] for o in cpu], abs=1e-4)
    elif task == "ner":
        strip = lambda rows: [[(e["type"], e["start"], e["end"]) for e in r] for r in rows]  # noqa: E731
        assert strip(out) == strip(cpu)
    else:
        words = lambda rows: [[(w["start"], w["end"], w["pos"]) for w in r["words"]] for r in rows]  # noqa: E731
        assert words(out) == words(cpu)


def test_the_server_model_on_cuda_runs_in_bf16_and_agrees_with_the_cpu():
    from nlp.deploy.server_model import load_pipeline_for_serving

    served = load_pipeline_for_serving(ASSET / "ernie-tiny-zh-sentiment-small", device="cuda")
    major, _ = torch.cuda.get_device_capability()
    assert served.device.startswith("cuda") and served.precision == ("bf16" if major >= 8 else "fp16")
    assert served.pipeline.backend.precision == served.precision  # the weights cast once
    out = served.pipeline(TEXTS)
    cpu = load_pipeline_for_serving(ASSET / "ernie-tiny-zh-sentiment-small", device="cpu", precision="fp32").pipeline(TEXTS)
    assert [o[0]["label"] for o in out] == [o[0]["label"] for o in cpu]
    assert [o[0]["score"] for o in out] == pytest.approx([o[0]["score"] for o in cpu], abs=2e-2)
