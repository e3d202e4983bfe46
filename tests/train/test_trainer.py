"""The engine on a toy model: determinism, exact resume, non-finite losses, output-dir policy,
atomic checkpoints, accumulation, early stopping, run artefacts."""

import json
import logging
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))
import _toy  # noqa: E402

from nlp._common import ConfigError  # noqa: E402
from nlp.train import Trainer, TrainingError, TrainingInterrupted  # noqa: E402
from nlp.train import checkpoint as ckpt_mod  # noqa: E402
from nlp.tokenizer.samplers import SequentialShardSampler  # noqa: E402


def params(trainer):
    return {k: v.detach().clone() for k, v in trainer.accelerator.unwrap_model(trainer._model).state_dict().items()}


def test_same_seed_same_loss_curve(tmp_path):
    _toy.make_trainer(tmp_path / "a").train()
    _toy.make_trainer(tmp_path / "b").train()
    a, b = _toy.losses(tmp_path / "a"), _toy.losses(tmp_path / "b")
    assert len(a) == 12 and a == b
    assert _toy.losses(tmp_path / "a") != _toy.losses(
        _toy.make_trainer(tmp_path / "c", seed=1).train().model_dir.parent)  # the seed matters


@pytest.mark.parametrize(
    "stop_at, batching",
    [(5, "dynamic"), (6, "length_grouped"), (5, "packed")],  # mid-epoch after an eval; epoch end
)
def test_resume_continues_the_same_loss_curve(tmp_path, stop_at, batching):
    """Shuffling and dropout on, grad accumulation 2, eval every 4 steps, 3 epochs."""
    kw = dict(epochs=3, grad_accum_steps=2, data__batch_size=4, checkpoint__keep_last=1,
              data__batching=batching, data__pack_max_length=16)
    full = _toy.make_trainer(tmp_path / "full", **kw)
    full.train()
    stopped = _toy.make_trainer(tmp_path / "run", callbacks=[_toy.StopAt(stop_at)], **kw)
    total = stopped.total_steps
    with pytest.raises(TrainingInterrupted, match=f"at step {stop_at}/{total}") as e:
        stopped.train()
    assert e.value.checkpoint.name == f"step-{stop_at:08d}" and e.value.signum is None
    resumed = _toy.make_trainer(tmp_path / "run", model_seed=123, **kw)  # weights come from the checkpoint
    result = resumed.train()
    assert result.status == "finished" and result.step == total
    full_losses, run_losses = _toy.losses(tmp_path / "full"), _toy.losses(tmp_path / "run")
    assert sorted(run_losses) == list(range(1, total + 1))  # the log was not duplicated by the resume
    assert run_losses == pytest.approx(full_losses, abs=1e-6, rel=0)
    for k, v in params(full).items():
        torch.testing.assert_close(params(resumed)[k], v, rtol=0, atol=1e-6)
    if batching == "packed":  # batch_size=4 rows of at most pack_max_length=16 tokens
        data = _toy.make_dataset(48)
        sizes = [sum(len(data[i]["input_ids"]) for i in batch) for batch in resumed.sampler]
        assert max(sizes) <= 4 * 16 and max(sizes) > 16
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["best_step"] == json.loads((tmp_path / "full" / "summary.json").read_text())["best_step"]


def test_a_step_the_loss_scaler_skipped_leaves_the_lr_schedule(tmp_path):
    """fp16's GradScaler halves its scale when it skips a step with inf gradients; AdamW's fused
    CUDA kernel skips inside its own step, which accelerate's skipped-step flag does not see. The
    schedule must wait all the same. fp16 needs CUDA (tests/gpu/test_cuda.py runs the real thing);
    here a stand-in scaler whose scale drops during the second step."""

    class HalvingScaler:  # what accelerate and the trainer call of a GradScaler
        def __init__(self):
            self.steps, self.value = 0, 65536.0

        def scale(self, loss):
            return loss

        def unscale_(self, optimizer):
            pass

        def get_scale(self):
            return self.value

        def state_dict(self):  # saved with each checkpoint
            return {"scale": self.value}

    scaler = HalvingScaler()
    trainer = _toy.make_trainer(tmp_path / "a", max_steps=4, epochs=1, eval__every_steps=None)
    trainer.accelerator.scaler = scaler
    step = trainer.optimizer.step

    def step_that_overflows_second(*args, **kwargs):
        scaler.steps += 1
        if scaler.steps == 2:
            scaler.value /= 2
        return step(*args, **kwargs)

    trainer.optimizer.step = step_that_overflows_second
    lrs = {}

    class Watch:
        def on_step_end(self, tr, state):
            lrs[state.step] = tr.scheduler.get_last_lr()[0]

    trainer.callbacks.append(Watch())
    assert trainer.train().status == "finished"
    assert lrs[2] == lrs[1] and lrs[3] != lrs[2] and lrs[4] != lrs[3]  # one step of the schedule lost
    assert trainer.scheduler.last_epoch == 3


def test_nonfinite_loss_skips_the_step_then_stops(tmp_path, caplog):
    trainer = _toy.make_trainer(tmp_path / "a", max_nonfinite_steps=3, eval__every_steps=None)
    trainer.model.nan_steps = {2}
    before = None

    class Watch:
        def on_step_end(self, tr, state):
            nonlocal before
            if state.step == 1:
                before = params(tr)
            if state.step == 2:  # the NaN step changed nothing
                for k, v in params(tr).items():
                    assert torch.equal(v, before[k]), k

    trainer.callbacks.append(Watch())
    with caplog.at_level(logging.WARNING, logger="nlp.train.trainer"):
        result = trainer.train()
    assert result.status == "finished"
    assert "step 2: loss is nan; skipped the update (1 in a row" in caplog.text
    assert all(torch.isfinite(v).all() for v in params(trainer).values())

    trainer = _toy.make_trainer(tmp_path / "b", max_nonfinite_steps=3)
    trainer.model.nan_steps = {3, 4, 5}
    with pytest.raises(TrainingError, match="NaN/inf for 3 steps in a row"):
        trainer.train()


def test_output_dir_is_resumed_or_refused_never_overwritten(tmp_path):
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "notes.txt").write_text("mine")
    with pytest.raises(ConfigError, match="not empty and holds no checkpoint"):
        _toy.make_trainer(tmp_path / "busy").train()
    assert (tmp_path / "busy" / "notes.txt").read_text() == "mine"

    _toy.make_trainer(tmp_path / "done", epochs=1).train()
    with pytest.raises(ConfigError, match="already holds a run .* resume=never"):
        _toy.make_trainer(tmp_path / "done", epochs=1, resume="never").train()
    with pytest.raises(ConfigError, match="has no checkpoint"):
        _toy.make_trainer(tmp_path / "new", resume="must").train()
    # auto on a finished run: nothing left to do, nothing lost
    result = _toy.make_trainer(tmp_path / "done", epochs=1).train()
    assert result.step == 6 and len(_toy.losses(tmp_path / "done")) == 6


def test_a_crash_while_saving_leaves_the_previous_checkpoint(tmp_path, monkeypatch):
    trainer = _toy.make_trainer(tmp_path / "a", eval__every_steps=None, checkpoint__every_steps=2)
    real = ckpt_mod.safetensors.torch.save_model
    calls = 0

    def flaky(*a, **k):
        nonlocal calls
        calls += 1
        if calls == 2:
            real(*a, **k)  # half the checkpoint is written...
            raise OSError("disk full")  # ...then the save dies
        return real(*a, **k)

    monkeypatch.setattr(ckpt_mod.safetensors.torch, "save_model", flaky)
    with pytest.raises(OSError, match="disk full"):
        trainer.train()
    root = tmp_path / "a" / "checkpoints"
    assert sorted(p.name for p in root.iterdir()) == ["step-00000002"]  # no temp dir, no step 4
    state = json.loads((root / "step-00000002" / "trainer_state.json").read_text())
    assert state["step"] == 2
    monkeypatch.setattr(ckpt_mod.safetensors.torch, "save_model", real)
    assert _toy.make_trainer(tmp_path / "a", eval__every_steps=None, checkpoint__every_steps=2).train().step == 12


def test_rotation_keeps_last_n_and_the_best(tmp_path):
    result = _toy.make_trainer(tmp_path / "a", epochs=3, checkpoint__keep_last=1, eval__every_steps=2).train()
    names = sorted(p.name for p in (tmp_path / "a" / "checkpoints").iterdir())
    assert names == sorted({result.best_checkpoint.name, "step-00000018"})


def test_gradient_accumulation_equals_the_big_batch(tmp_path):
    common = dict(eval__every_steps=None, schedule__warmup_steps=0, epochs=1)

    def run(name, **kw):
        torch.manual_seed(0)
        model = _toy.ToyClassifier(dropout=0.0)
        t = Trainer(model, _toy.settings(tmp_path / name, **common, **kw),
                    train_dataset=_toy.make_dataset(48), collate_fn=_toy.collate)
        t.train()
        return params(t)

    big, accumulated = run("big", data__batch_size=8), run("acc", data__batch_size=4, grad_accum_steps=2)
    for k in big:
        torch.testing.assert_close(accumulated[k], big[k], rtol=1e-5, atol=1e-6)


def test_early_stopping_and_best_model_export(tmp_path):
    # eval on the loss with an lr so large that it gets worse: patience 2 stops the run early
    result = _toy.make_trainer(tmp_path / "a", epochs=5, optim__lr=5.0, eval__metric="loss",
                               eval__every_steps=1, eval__early_stopping_patience=2).train()
    assert result.status == "early_stopping" and result.step < 30
    assert result.step == result.best_step + 2
    exported = _toy.ToyClassifier()
    from safetensors.torch import load_model

    load_model(exported, str(result.model_dir / "model.safetensors"))
    from safetensors.torch import load_file

    best = load_file(str(result.best_checkpoint / "model.safetensors"))
    assert torch.equal(exported.head.weight, best["head.weight"])


def test_run_directory_artefacts(tmp_path):
    result = _toy.make_trainer(tmp_path / "a", log__tensorboard=True, log__plots=True).train()
    out = tmp_path / "a"
    for name in ("loss.png", "lr.png", "eval.png", "summary.json", "settings.json", "metrics.jsonl"):
        assert (out / name).stat().st_size > 0, name
    assert list((out / "tensorboard").rglob("events.out.tfevents.*"))
    s = result.summary
    assert s["status"] == "finished" and s["steps"] == 12 and s["best_step"] in (4, 8, 12)
    assert s["tokens_per_second"] > 0 and s["peak_memory_mb"] > 10 and s["mixed_precision"] == "no"
    evals = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in evals if r["type"] == "eval"] == [4, 6, 8, 12]  # every 4 + epoch ends


class _TokenizerFiles:
    """Stands for the tokenizer saved with the model: records whether model/ was visible while it
    was being written, and can fail like a full disk."""

    def __init__(self, final_dir: Path, fail: bool = False) -> None:
        self.final_dir, self.fail, self.model_visible_meanwhile = final_dir, fail, None

    def save_pretrained(self, directory) -> None:
        self.model_visible_meanwhile = self.final_dir.exists() and not (self.final_dir / "old-marker").exists()
        (Path(directory) / "tokenizer_config.json").write_text("{}", encoding="utf-8")
        if self.fail:
            raise OSError("disk full")


def test_the_model_directory_appears_whole_with_its_tokenizer(tmp_path):
    """Issue 24: a run's model/ became visible before its tokenizer files. Written whole under a
    temporary name, then renamed; a failed save leaves the previous model/ as it was."""
    out = tmp_path / "a"
    tok = _TokenizerFiles(out / "model")
    result = _toy.make_trainer(out, saved_with_model=[tok]).train()
    assert tok.model_visible_meanwhile is False
    assert sorted(p.name for p in result.model_dir.iterdir()) == ["model.safetensors", "tokenizer_config.json"]
    assert [p.name for p in out.iterdir() if p.name.startswith(".tmp")] == []
    (result.model_dir / "old-marker").write_text("the model saved before", encoding="utf-8")
    trainer = _toy.make_trainer(tmp_path / "b", saved_with_model=[_TokenizerFiles(out / "model", fail=True)])
    with pytest.raises(OSError, match="disk full"):
        trainer.save_model(out / "model")
    assert (out / "model" / "old-marker").is_file()  # the previous model/ is untouched
    assert [p.name for p in out.iterdir() if p.name.startswith(".tmp")] == []
    replacing = _TokenizerFiles(out / "model")
    _toy.make_trainer(tmp_path / "c", saved_with_model=[replacing]).save_model(out / "model")
    assert replacing.model_visible_meanwhile is False  # the old one stayed in place until the rename
    assert not (out / "model" / "old-marker").exists() and (out / "model" / "tokenizer_config.json").is_file()


def _on_model_device(model, batch):
    """The batch on the model's device (the engine trains on CUDA where there is one)."""
    device = next(model.parameters()).device
    return {k: v.to(device) for k, v in batch.items()}


def test_evaluate_and_predict_keep_dataset_order(tmp_path):
    trainer = _toy.make_trainer(tmp_path / "a")
    data = _toy.make_dataset(10, seed=3)
    pred = trainer.predict(data)
    assert [int(lab) for lab in pred.label_ids] == [ex["labels"] for ex in data]
    model = trainer.model.eval()
    with torch.no_grad():
        direct = model(**_on_model_device(model, _toy.collate(data[4:5]))).logits[0].cpu()
    torch.testing.assert_close(torch.from_numpy(pred.predictions[4]), direct)
    metrics = trainer.evaluate(data)
    assert set(metrics) == {"loss", "accuracy"}


def test_evaluation_batches_examples_of_similar_length(tmp_path):
    """Eval batches are formed longest first (little padding), predictions stay in dataset order."""
    trainer = _toy.make_trainer(tmp_path / "a", data__eval_batch_size=4)
    data = _toy.make_dataset(20, seed=5)
    seen = []
    original = trainer.eval_collate_fn
    trainer.eval_collate_fn = lambda feats: (seen.append([len(f["input_ids"]) for f in feats]), original(feats))[1]
    pred = trainer.predict(data)
    flat = [n for batch in seen for n in batch]
    assert flat == sorted((len(ex["input_ids"]) for ex in data), reverse=True)
    assert [int(lab) for lab in pred.label_ids] == [ex["labels"] for ex in data]
    model = trainer.model.eval()
    with torch.no_grad():
        for i in (0, 7, 19):
            direct = model(**_on_model_device(model, _toy.collate(data[i:i + 1]))).logits[0].cpu()
            torch.testing.assert_close(torch.from_numpy(pred.predictions[i]), direct)


def test_sequential_shard_sampler_with_lengths_covers_every_example_once():
    lengths = [3, 9, 9, 1, 5, 7, 2]
    shards = [list(SequentialShardSampler(7, 2, num_replicas=2, rank=r, lengths=lengths)) for r in (0, 1)]
    assert shards[0] == [[2, 4], [0, 6]] and shards[1] == [[1, 5], [3]]
    with pytest.raises(ValueError, match="6 lengths for 7 examples"):
        SequentialShardSampler(7, 2, lengths=lengths[:6])


def test_bad_engine_inputs_are_clear(tmp_path):
    with pytest.raises(ConfigError, match="no gradient_checkpointing_enable"):
        Trainer(torch.nn.Linear(2, 2), _toy.settings(tmp_path / "a", gradient_checkpointing=True),
                train_dataset=[1], collate_fn=_toy.collate)
    with pytest.raises(ConfigError, match="eval.metric='f1' needs a compute_metrics"):
        Trainer(_toy.ToyClassifier(), _toy.settings(tmp_path / "a", eval__metric="f1"),
                train_dataset=[1], collate_fn=_toy.collate, eval_dataset=[1])
    t = _toy.make_trainer(tmp_path / "b", gradient_checkpointing=True, eval__metric="f1")
    assert t.model.checkpointing
    with pytest.raises(TrainingError, match="eval.metric='f1' is not among .*accuracy"):
        t.train()


def test_loss_units_count_what_the_mean_loss_averages_over():
    from nlp.train.trainer import count_loss_units

    assert count_loss_units({"labels": torch.tensor([1, 0, 2])}) == 3  # examples
    tokens = torch.tensor([[-100, 3, 4, -100], [-100, 1, -100, -100]])
    assert count_loss_units({"labels": tokens}) == 3  # labelled tokens (NER, MLM)
    assert count_loss_units({"labels": torch.zeros(2, 5)}) == 10  # multi-label / regression targets
    qa = {"start_positions": torch.tensor([4, 0]), "end_positions": torch.tensor([6, 0])}
    assert count_loss_units(qa, ("start_positions", "end_positions")) == 2
    assert count_loss_units({"input_ids": torch.ones(2, 3)}) is None  # nothing to count: equal weights
