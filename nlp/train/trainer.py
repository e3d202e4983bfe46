"""The fine-tuning engine: a plain PyTorch loop on top of accelerate.

Generic over task: the model's `forward(**batch)` returns an object with `.loss` (and `.logits`
for evaluation); datasets are sequences of feature dicts; `collate_fn` turns a list of them into
a dict of tensors; `compute_metrics(EvalPrediction) -> {name: value}` scores an evaluation.

    trainer = Trainer(model, TrainSettings(output_dir="runs/x"), train_dataset=train,
                      collate_fn=DataCollatorWithPadding(), eval_dataset=dev,
                      compute_metrics=accuracy)
    result = trainer.train()     # resumes OUTPUT_DIR's last checkpoint when there is one

`Trainer.train` is the loop, readable top to bottom; set-up, stepping, evaluation, checkpoints
and logging live in the helpers below it.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

import torch
from accelerate import Accelerator
from accelerate.utils import set_seed

from nlp._common import ConfigError, atomic_write, did_you_mean
from nlp.train.checkpoint import CheckpointManager, TrainerState, restore_rng
from nlp.train.errors import TrainingError, TrainingInterrupted
from nlp.train.evaluation import EvalPrediction, default_preprocess, predict_loop
from nlp.train.optim import build_optimizer, build_scheduler
from nlp.train.precision import check_distributed_backend, limit_onednn_cache, resolve_mixed_precision
from nlp.train.sampling import EpochBatchSampler, RandomBatchSampler, skip_batches
from nlp.train.settings import TrainSettings, to_dict
from nlp.train.signals import stop_on_signals
from nlp.train.tracking import RunLog, peak_memory_mb, write_plots, write_summary

__all__ = ["Trainer", "TrainResult"]

logger = logging.getLogger(__name__)

ComputeMetrics = Callable[[EvalPrediction], Mapping[str, float]]


@dataclass
class TrainResult:
    status: str  # "finished" | "early_stopping"
    step: int
    best_metric: float | None
    best_step: int | None
    best_checkpoint: Path | None
    model_dir: Path  # the exported model (best one when checkpoint.load_best_at_end)
    summary: dict[str, Any]


class Trainer:
    """Fine-tune `model` on `train_dataset` according to `settings`.

    Hooks for the task layer:
      compute_metrics(EvalPrediction) -> {name: float}: scores an evaluation; `settings.eval.
          metric` names the key that picks the best checkpoint ("loss" needs no hook).
      preprocess_logits(outputs, batch) -> tensor | tuple: what to keep of each eval batch,
          one row per example (default: outputs.logits).
      label_keys: batch keys handed to compute_metrics as label_ids (QA: start/end_positions).
      eval_collate_fn: collator for eval/predict when training packs sequences.
      batch_sampler: a ready EpochBatchSampler for THIS process, replacing the one that
          settings.data.batching would build (set_epoch + deterministic order per epoch).
      callbacks: objects with any of on_step_end(trainer, state), on_evaluate(trainer,
          state, metrics), on_train_end(trainer, state); `trainer.request_stop()` from a
          callback stops like SIGTERM. on_train_end runs once the final model (the best
          checkpoint's, with load_best_at_end) is exported and every process still takes part:
          the place for a last `trainer.evaluate(dataset)` (the same evaluation as in training).
    """

    def __init__(
        self,
        model: torch.nn.Module,
        settings: TrainSettings,
        *,
        train_dataset: Sequence[Any],
        collate_fn: Callable[[list[Any]], dict[str, torch.Tensor]],
        eval_dataset: Sequence[Any] | None = None,
        eval_collate_fn: Callable[[list[Any]], dict[str, torch.Tensor]] | None = None,
        compute_metrics: ComputeMetrics | None = None,
        preprocess_logits: Callable[[Any, Mapping[str, torch.Tensor]], Any] = default_preprocess,
        label_keys: Sequence[str] = ("labels",),
        lengths: Sequence[int] | None = None,
        batch_sampler: EpochBatchSampler | None = None,
        callbacks: Sequence[Any] = (),
    ) -> None:
        s = self.settings = settings
        if s.eval.metric != "loss" and compute_metrics is None and eval_dataset is not None:
            raise ConfigError(
                f"eval.metric={s.eval.metric!r} needs a compute_metrics function; without one "
                "only eval.metric=loss is available"
            )
        use_cuda = torch.cuda.is_available() and not s.cpu
        check_distributed_backend(use_cuda)
        _fresh_accelerator_state()
        precision = resolve_mixed_precision(s.mixed_precision, use_cuda=use_cuda)
        if precision == "bf16" and not use_cuda:
            limit_onednn_cache()
        self.accelerator = Accelerator(
            mixed_precision=precision,
            cpu=not use_cuda,
            # Accumulation is done by the loop itself (no_sync + loss / n), not by accelerate's
            # step counter: the last, shorter group of an epoch is then weighted right, and
            # every checkpoint falls on an optimizer-step boundary for exact resume.
            gradient_accumulation_steps=1,
            log_with="tensorboard" if s.log.tensorboard else None,
            project_dir=s.output_dir,
            step_scheduler_with_optimizer=False,
        )
        acc = self.accelerator
        if acc.distributed_type.name in ("FSDP", "DEEPSPEED"):
            # Checkpoints here save one full state dict from the main process; sharded
            # optimizer/parameter states need accelerator.save_state, not wired in yet.
            raise ConfigError(
                f"{acc.distributed_type.name} is not supported by nlp.train's checkpoints yet; "
                "use plain data-parallel (accelerate launch --multi_gpu, see docs/training.md)"
            )
        if s.data.batch_size % acc.num_processes:
            raise ConfigError(
                f"data.batch_size={s.data.batch_size} is the global batch and must be divisible "
                f"by the {acc.num_processes} processes; try "
                f"{s.data.batch_size // acc.num_processes * acc.num_processes or acc.num_processes}"
            )
        if s.gradient_checkpointing:
            if not hasattr(model, "gradient_checkpointing_enable"):
                raise ConfigError(
                    f"gradient_checkpointing=true, but {type(model).__name__} has no "
                    "gradient_checkpointing_enable(); set gradient_checkpointing=false"
                )
            model.gradient_checkpointing_enable()
        self.model = model
        self.train_dataset, self.collate_fn = train_dataset, collate_fn
        self.eval_dataset = eval_dataset
        self.eval_collate_fn = eval_collate_fn or collate_fn
        self.compute_metrics, self.preprocess_logits = compute_metrics, preprocess_logits
        self.label_keys, self.callbacks = tuple(label_keys), list(callbacks)
        self.sampler = batch_sampler or self._build_sampler(lengths)
        if len(self.sampler) == 0:
            raise ConfigError(
                f"the training set ({len(train_dataset)} examples) gives no batch of "
                f"data.batch_size={s.data.batch_size} (data.drop_last={s.data.drop_last})"
            )
        self.steps_per_epoch = math.ceil(len(self.sampler) / s.grad_accum_steps)
        self.total_steps = s.max_steps or math.ceil(s.epochs * self.steps_per_epoch)
        optimizer = build_optimizer(model, s.optim)
        self.scheduler = build_scheduler(optimizer, s.schedule, self.total_steps)
        self._model, self.optimizer = acc.prepare(model, optimizer)
        self.output_dir = Path(s.output_dir)
        self.checkpoints = CheckpointManager(
            self.output_dir / "checkpoints",
            is_main=acc.is_main_process,
            rank=acc.process_index,
            barrier=acc.wait_for_everyone,
        )
        self._stop_signal: int | None = None
        self._stop_requested = False

    # ------------------------------------------------------------------ the loop

    def train(self) -> TrainResult:
        s, acc = self.settings, self.accelerator
        state = self._start()
        log = self._open_log(state)
        started, session_tokens = time.perf_counter(), 0
        status = "finished"
        with stop_on_signals(self._on_signal), contextlib.closing(log):
            while state.step < self.total_steps and status == "finished":
                for n_micro, batches in self._epoch_steps(state):
                    loss, tokens, grad_norm = self._train_step(n_micro, batches, state)
                    state.step += 1
                    state.batches_in_epoch += n_micro
                    session_tokens += tokens
                    self._log_step(log, state, loss, grad_norm, tokens, started)
                    epoch_end = state.batches_in_epoch >= len(self.sampler)
                    if self._eval_due(state, epoch_end):  # evaluates, then saves a checkpoint
                        if self._evaluate_and_track(log, state):
                            status = "early_stopping"
                    elif self._checkpoint_due(state, epoch_end):
                        self._save(state)
                    self._run_callbacks("on_step_end", state)
                    if self._should_stop(state):
                        self._interrupt(state, log, started, session_tokens)
                    if state.step >= self.total_steps or status != "finished":
                        break
                else:  # the epoch ran out: the next one starts at its first batch
                    state.epoch, state.batches_in_epoch = state.epoch + 1, 0
            return self._finish(state, status, log, started, session_tokens)

    def _epoch_steps(self, state: TrainerState) -> Iterator[tuple[int, Iterator[dict]]]:
        """Yield (number of micro-batches, their iterator) per optimizer step of this epoch,
        starting at the saved position inside it."""
        self.sampler.set_epoch(state.epoch)
        sampler = skip_batches(self.sampler, state.batches_in_epoch) if state.batches_in_epoch else self.sampler
        loader = torch.utils.data.DataLoader(
            self.train_dataset,
            batch_sampler=sampler,
            collate_fn=self.collate_fn,
            num_workers=self.settings.data.num_workers,
            pin_memory=self.accelerator.device.type == "cuda",
            # Own generator: creating the iterator must not draw from the global torch RNG
            # (that would shift dropout masks between a resumed and an unbroken run).
            generator=torch.Generator(),
        )
        it = iter(loader)
        left = len(self.sampler) - state.batches_in_epoch
        while left > 0:
            n = min(self.settings.grad_accum_steps, left)
            left -= n
            yield n, (self._to_device(next(it)) for _ in range(n))

    def _train_step(self, n: int, batches: Iterator[dict], state: TrainerState) -> tuple[float, int, float | None]:
        """Forward/backward over n micro-batches, then one optimizer step, unless the loss is
        not finite (then the gradients are dropped). Returns (loss, tokens, grad norm)."""
        acc, model = self.accelerator, self._model
        model.train()
        total, tokens = torch.zeros((), device=acc.device), 0
        for i, batch in enumerate(batches):
            # Gradients are all-reduced only on the last micro-batch of the step.
            with acc.no_sync(model) if i < n - 1 else contextlib.nullcontext():
                loss = _loss_of(model(**batch))
                acc.backward(loss / n)
            total += loss.detach().float()
            tokens += _count_tokens(batch)
        loss = total / n
        if self._agree(not bool(torch.isfinite(loss))):
            self.optimizer.zero_grad(set_to_none=True)
            state.nonfinite_streak += 1
            logger.warning(
                "step %d: loss is %s; skipped the update (%d in a row, stopping at %d)",
                state.step + 1, loss.item(), state.nonfinite_streak, self.settings.max_nonfinite_steps,
            )
            if state.nonfinite_streak >= self.settings.max_nonfinite_steps:
                raise TrainingError(
                    f"the loss was NaN/inf for {state.nonfinite_streak} steps in a row (up to step "
                    f"{state.step + 1}); lower optim.lr, set optim.max_grad_norm, use "
                    "mixed_precision=no or bf16 instead of fp16, or check the data for broken labels"
                )
            return float("nan"), tokens, None
        state.nonfinite_streak = 0
        grad_norm = None
        if self.settings.optim.max_grad_norm is not None:
            grad_norm = float(acc.clip_grad_norm_(model.parameters(), self.settings.optim.max_grad_norm))
        self.optimizer.step()
        if not acc.optimizer_step_was_skipped:  # fp16 loss scaler found inf gradients
            self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        return loss.item(), tokens, grad_norm

    # ------------------------------------------------------------------ evaluate / predict

    def evaluate(self, dataset: Sequence[Any] | None = None) -> dict[str, float]:
        """Mean loss (as "loss", when the model returns one) and compute_metrics' values."""
        dataset = self.eval_dataset if dataset is None else dataset
        if dataset is None:
            raise ConfigError("evaluate() needs a dataset: none given and no eval_dataset set")
        prediction, loss = self._predict(dataset)
        metrics: dict[str, float] = {} if loss is None else {"loss": loss}
        if self.compute_metrics is not None:
            metrics.update({k: float(v) for k, v in self.compute_metrics(prediction).items()})
        return metrics

    def predict(self, dataset: Sequence[Any]) -> EvalPrediction:
        """Per-example predictions (and labels, when the batches have them), in dataset order."""
        return self._predict(dataset)[0]

    def _predict(self, dataset: Sequence[Any]) -> tuple[EvalPrediction, float | None]:
        s = self.settings.data
        return predict_loop(
            self._model,
            dataset,
            self.eval_collate_fn,
            accelerator=self.accelerator,
            batch_size=max(1, (s.eval_batch_size or 2 * s.batch_size) // self.accelerator.num_processes),
            preprocess=self.preprocess_logits,
            label_keys=self.label_keys,
            num_workers=s.num_workers,
        )

    def request_stop(self) -> None:
        """Stop at the end of the current step, after saving a resumable checkpoint."""
        self._stop_requested = True

    def save_model(self, directory: str | Path) -> Path:
        """Export the (unwrapped) model: save_pretrained when the model has it, else
        model.safetensors. Main process only; the others wait."""
        directory = Path(directory)
        model = self.accelerator.unwrap_model(self._model)
        if self.accelerator.is_main_process:
            directory.mkdir(parents=True, exist_ok=True)
            if hasattr(model, "save_pretrained"):
                model.save_pretrained(directory)
            else:
                import safetensors.torch

                safetensors.torch.save_model(model, str(directory / "model.safetensors"))
        self.accelerator.wait_for_everyone()
        return directory

    # ------------------------------------------------------------------ set-up

    def _build_sampler(self, lengths: Sequence[int] | None) -> EpochBatchSampler:
        s, acc = self.settings, self.accelerator
        if s.data.batching in ("length_grouped", "packed"):
            # The tokenizer layer's samplers: deterministic per (seed, epoch), sharded by rank,
            # batch_size per process. The trainer resumes them by skipping finished batches.
            from nlp.tokenizer.samplers import LengthGroupedBatchSampler, PackedBatchSampler

            if lengths is None:
                lengths = [len(ex["input_ids"]) for ex in self.train_dataset]
            common = dict(shuffle=s.data.shuffle, seed=s.seed, num_replicas=acc.num_processes,
                          rank=acc.process_index, drop_last=s.data.drop_last)
            per_process = s.data.batch_size // acc.num_processes
            if s.data.batching == "packed":  # the task layer passes a PackingCollator
                return PackedBatchSampler(lengths, s.data.pack_max_length, per_process, **common)
            return LengthGroupedBatchSampler(lengths, per_process, **common)
        return RandomBatchSampler(
            len(self.train_dataset),
            s.data.batch_size,
            shuffle=s.data.shuffle,
            seed=s.seed,
            num_replicas=acc.num_processes,
            rank=acc.process_index,
            drop_last=s.data.drop_last,
        )

    def _start(self) -> TrainerState:
        """Apply the output-directory policy: resume its last checkpoint, or start fresh in an
        empty/new directory, or refuse — never overwrite a run silently."""
        s, acc = self.settings, self.accelerator
        resume_from = self._resume_target()
        acc.wait_for_everyone()  # every process decides before the main one writes anything
        state = TrainerState(world_size=acc.num_processes)
        if resume_from is None:
            set_seed(s.seed)
            if acc.is_main_process:
                self.output_dir.mkdir(parents=True, exist_ok=True)
                with atomic_write(self.output_dir / "settings.json", "w", encoding="utf-8") as f:
                    json.dump(to_dict(s), f, indent=2, ensure_ascii=False)
            acc.wait_for_everyone()
        else:
            self._warn_changed_settings()
            state, rng = self.checkpoints.load(
                resume_from,
                model=self.accelerator.unwrap_model(self._model),
                optimizer=self.optimizer.optimizer if hasattr(self.optimizer, "optimizer") else self.optimizer,
                scheduler=self.scheduler,
                scaler=acc.scaler,
            )
            if state.world_size != acc.num_processes or rng is None:
                logger.warning(
                    "resuming a run saved with %d processes on %d: the data order is kept, but "
                    "dropout masks will differ from an unbroken run",
                    state.world_size, acc.num_processes,
                )
                set_seed(s.seed + state.step)
            else:
                restore_rng(rng)
            state.world_size = acc.num_processes
            logger.info("resumed from %s at step %d (epoch %d)", resume_from, state.step, state.epoch)
        if s.log.tensorboard:
            acc.init_trackers("tensorboard", config=_flat_hparams(to_dict(s)))
        self._last_saved_step = state.step if resume_from is not None else -1
        self._last_log = (time.perf_counter(), 0, 0.0, 0)  # time, tokens, loss sum, steps
        return state

    def _resume_target(self) -> Path | None:
        s, out = self.settings, self.output_dir
        if s.resume not in ("auto", "never", "must"):
            path = Path(s.resume)
            if not (path / "trainer_state.json").is_file():
                raise ConfigError(
                    f"resume={s.resume!r} is not a checkpoint directory (no trainer_state.json). "
                    "Give a step-NNNNNNNN directory under OUTPUT_DIR/checkpoints, or auto/never/must."
                )
            return path
        latest = self.checkpoints.latest()
        if latest is not None:
            if s.resume == "never":
                raise ConfigError(
                    f"output_dir {out} already holds a run (last checkpoint {latest.name}) and "
                    "resume=never. Continue it with resume=auto, or pick another output_dir."
                )
            return latest
        if s.resume == "must":
            raise ConfigError(f"resume=must, but output_dir {out} has no checkpoint to resume")
        if out.exists() and any(out.iterdir()):
            raise ConfigError(
                f"output_dir {out} is not empty and holds no checkpoint to resume; refusing to "
                "overwrite it. Pick another output_dir, or delete this one."
            )
        return None

    def _warn_changed_settings(self) -> None:
        path = self.output_dir / "settings.json"
        if not path.exists():
            return
        old = _flat_hparams(json.loads(path.read_text(encoding="utf-8")))
        new = _flat_hparams(to_dict(self.settings))
        changed = [k for k in new if k != "resume" and old.get(k) != new[k]]
        if changed:
            logger.warning(
                "resuming with changed settings (%s); the run will not match an unbroken one",
                ", ".join(f"{k}: {old.get(k)!r} -> {new[k]!r}" for k in changed),
            )

    def _open_log(self, state: TrainerState) -> RunLog:
        return RunLog(
            self.output_dir,
            enabled=self.accelerator.is_main_process,
            progress_bar=self.settings.log.progress_bar,
            total_steps=self.total_steps,
            start_step=state.step,
            accelerator=self.accelerator if self.settings.log.tensorboard else None,
        )

    # ------------------------------------------------------------------ bookkeeping

    def _to_device(self, batch: Mapping[str, Any]) -> dict[str, Any]:
        device = self.accelerator.device
        return {k: v.to(device, non_blocking=True) if torch.is_tensor(v) else v for k, v in batch.items()}

    def _agree(self, flag: bool) -> bool:
        """True on every process when `flag` is true on any (a skipped step or a stop request
        must happen everywhere, or data-parallel processes would wait on each other forever)."""
        if self.accelerator.num_processes == 1:
            return flag
        t = torch.tensor([float(flag)], device=self.accelerator.device)
        return bool(self.accelerator.reduce(t, "sum").item() > 0)

    def _log_step(self, log: RunLog, state: TrainerState, loss: float, grad_norm: float | None,
                  tokens: int, started: float) -> None:
        t0, tok0, loss_sum, n = self._last_log
        if math.isfinite(loss):
            loss_sum, n = loss_sum + loss, n + 1
        tok0 += tokens
        self._last_log = (t0, tok0, loss_sum, n)
        if state.step % self.settings.log.every_steps and state.step != self.total_steps:
            return
        acc = self.accelerator
        stats = torch.tensor([loss_sum, float(n), float(tok0)], device=acc.device, dtype=torch.float64)
        if acc.num_processes > 1:
            stats = acc.reduce(stats, "sum")
        loss_sum, n, tok = stats.tolist()
        now = time.perf_counter()
        state.tokens_seen += int(tok)
        record = {
            "type": "train",
            "step": state.step,
            "epoch": round(state.epoch + state.batches_in_epoch / len(self.sampler), 4),
            "loss": loss_sum / n if n else float("nan"),
            "lr": self.scheduler.get_last_lr()[0],
            "grad_norm": grad_norm,
            "tokens_per_s": tok / max(now - t0, 1e-9),
        }
        log.write(record)
        log.progress(state.step, loss=f"{record['loss']:.4f}", lr=f"{record['lr']:.2e}",
                     tok_s=f"{record['tokens_per_s']:.0f}")
        self._last_log = (now, 0, 0.0, 0)

    def _eval_due(self, state: TrainerState, epoch_end: bool) -> bool:
        e = self.settings.eval
        if self.eval_dataset is None:
            return False
        return bool((e.every_steps and state.step % e.every_steps == 0) or (epoch_end and e.at_epoch_end)
                    or state.step == self.total_steps)

    def _checkpoint_due(self, state: TrainerState, epoch_end: bool) -> bool:
        every = self.settings.checkpoint.every_steps
        return bool(epoch_end or (every and state.step % every == 0))

    def _evaluate_and_track(self, log: RunLog, state: TrainerState) -> bool:
        """Evaluate, update the best metric, save a checkpoint; True when early stopping hits."""
        e = self.settings.eval
        metrics = self.evaluate()
        if e.metric not in metrics:
            raise TrainingError(
                f"eval.metric={e.metric!r} is not among the evaluation results "
                f"({', '.join(sorted(metrics)) or 'none'}).{did_you_mean(e.metric, metrics)}"
            )
        value = metrics[e.metric]
        log.write({"type": "eval", "step": state.step, "epoch": state.epoch,
                   **{f"eval_{k}": v for k, v in metrics.items()}})
        logger.info("step %d eval: %s", state.step, ", ".join(f"{k}={v:.5g}" for k, v in metrics.items()))
        better = state.best_metric is None or (
            value > state.best_metric if e.higher_is_better else value < state.best_metric
        )
        if better:
            state.best_metric, state.best_step = value, state.step
            state.best_checkpoint = f"step-{state.step:08d}"
            state.evals_without_improvement = 0
        else:
            state.evals_without_improvement += 1
        self._run_callbacks("on_evaluate", state, metrics)
        self._save(state)
        patience = e.early_stopping_patience
        if patience is not None and state.evals_without_improvement >= patience:
            logger.info("early stopping: %s did not improve for %d evaluations", e.metric, patience)
            return True
        return False

    def _save(self, state: TrainerState) -> Path:
        acc = self.accelerator
        path = self.checkpoints.save(
            state,
            model=acc.unwrap_model(self._model),
            optimizer=self.optimizer.optimizer if hasattr(self.optimizer, "optimizer") else self.optimizer,
            scheduler=self.scheduler,
            scaler=acc.scaler,
            keep_last=self.settings.checkpoint.keep_last,
        )
        self._last_saved_step = state.step
        return path

    def _on_signal(self, signum: int) -> None:
        self._stop_signal = signum
        self._stop_requested = True

    def _should_stop(self, state: TrainerState) -> bool:
        return self._agree(self._stop_requested)

    def _interrupt(self, state: TrainerState, log: RunLog, started: float, tokens: int) -> None:
        path = self._save(state) if self._last_saved_step != state.step else self.checkpoints.latest()
        self._write_report(state, "interrupted", started, tokens)
        self.accelerator.end_training()
        what = "a stop request" if self._stop_signal is None else f"signal {self._stop_signal}"
        raise TrainingInterrupted(
            f"stopped by {what} at step {state.step}/{self.total_steps}; checkpoint {path}. Run "
            "again with the same settings (resume=auto) to continue.",
            checkpoint=path,
            signum=self._stop_signal,
        )

    def _finish(self, state: TrainerState, status: str, log: RunLog, started: float, tokens: int) -> TrainResult:
        if self._last_saved_step != state.step:
            self._save(state)
        best = self.output_dir / "checkpoints" / state.best_checkpoint if state.best_checkpoint else None
        if self.settings.checkpoint.load_best_at_end and best is not None and state.best_step != state.step:
            import safetensors.torch

            safetensors.torch.load_model(self.accelerator.unwrap_model(self._model), str(best / "model.safetensors"))
            logger.info("loaded the best model (step %d) from %s", state.best_step, best)
        model_dir = self.save_model(self.output_dir / "model")
        summary = self._write_report(state, status, started, tokens)
        self._run_callbacks("on_train_end", state)
        self.accelerator.end_training()
        return TrainResult(status, state.step, state.best_metric, state.best_step, best, model_dir, summary)

    def _write_report(self, state: TrainerState, status: str, started: float, tokens: int) -> dict[str, Any]:
        wall = time.perf_counter() - started
        summary = {
            "status": status,
            "output_dir": str(self.output_dir),
            "steps": state.step,
            "total_steps": self.total_steps,
            "metric": self.settings.eval.metric,
            "best_metric": state.best_metric,
            "best_step": state.best_step,
            "best_checkpoint": state.best_checkpoint,
            "wall_seconds": round(wall, 3),
            "tokens_per_second": round(tokens * self.accelerator.num_processes / max(wall, 1e-9), 1),
            "peak_memory_mb": round(peak_memory_mb(self.accelerator.device), 1),
            "mixed_precision": self.accelerator.mixed_precision,
            "processes": self.accelerator.num_processes,
        }
        if self.accelerator.is_main_process:
            if self.settings.log.plots:
                write_plots(self.output_dir, self.settings.eval.metric)
            write_summary(self.output_dir, summary)
        return summary

    def _run_callbacks(self, event: str, *args: Any) -> None:
        for cb in self.callbacks:
            fn = getattr(cb, event, None)
            if fn is not None:
                fn(self, *args)


def _fresh_accelerator_state() -> None:
    """Forget the settings of an earlier Trainer in this process.

    accelerate keeps one process-wide AcceleratorState and refuses a second Accelerator with a
    different mixed_precision ("restart your runtime"); a notebook or test that trains twice
    must not need that. The process group (PartialState) is kept, so launched runs are unaffected.
    """
    from accelerate.state import AcceleratorState, GradientState

    with contextlib.suppress(AttributeError):  # private API: degrade to accelerate's own check
        AcceleratorState._reset_state(reset_partial_state=False)
        GradientState._reset_state()


def _loss_of(outputs: Any) -> torch.Tensor:
    loss = outputs.get("loss") if isinstance(outputs, Mapping) else getattr(outputs, "loss", None)
    if loss is None:
        raise TrainingError(
            "the model returned no loss: training batches must carry the labels "
            "(e.g. a 'labels' key) so that forward(**batch) computes .loss"
        )
    return loss


def _count_tokens(batch: Mapping[str, Any]) -> int:
    """Real (non-padding) tokens: what tokens/s should count."""
    mask = batch.get("attention_mask")
    if torch.is_tensor(mask):
        return int(mask.sum())
    ids = batch.get("input_ids")
    return int(ids.numel()) if torch.is_tensor(ids) else 0


def _flat_hparams(d: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested settings -> {"optim.lr": 5e-5, ...}, with TensorBoard-friendly scalar values."""
    out: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, Mapping):
            out.update(_flat_hparams(v, f"{prefix}{k}."))
        elif isinstance(v, (list, tuple)):
            out[f"{prefix}{k}"] = str(list(v))
        else:
            out[f"{prefix}{k}"] = "none" if v is None else v
    return out
