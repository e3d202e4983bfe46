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
import functools
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

from nlp._common import ConfigError, atomic_directory, did_you_mean
from nlp._extras import require
from nlp.tokenizer.samplers import (
    DistributedBatchSampler,
    EpochBatchSampler,
    LengthGroupedBatchSampler,
    PackedBatchSampler,
    skip_batches,
)
from nlp.train.checkpoint import CheckpointManager, TrainerState, restore_rng
from nlp.train.errors import TrainingError, TrainingInterrupted
from nlp.train.liveness import Liveness
from nlp.train.evaluation import EvalPrediction, default_preprocess, predict_loop
from nlp.train.optim import build_optimizer, build_scheduler
from nlp.train.precision import check_distributed_backend, limit_onednn_cache, resolve_mixed_precision
from nlp.train.run_dir import check_output_dir, claim_output_dir, leftovers_of_a_dead_run
from nlp.train.settings import TrainSettings, to_dict
from nlp.train.signals import stop_on_signals
from nlp.train.strategies import build_strategy, check_launcher
from nlp.train.tracking import LogWindow, RunLog, peak_memory_mb, write_plots, write_summary

__all__ = ["Trainer", "TrainResult", "count_loss_units"]

logger = logging.getLogger(__name__)

ComputeMetrics = Callable[[EvalPrediction], Mapping[str, float]]


@dataclass
class TrainResult:
    status: str  # "finished" | "early_stopping"
    step: int
    best_metric: float | None
    best_step: int | None
    best_checkpoint: Path | None
    model_dir: Path  # the final model (model/) (best one when checkpoint.load_best_at_end)
    summary: dict[str, Any]


class Trainer:
    """Fine-tune `model` on `train_dataset` according to `settings`.

    Hooks for the task layer:
      compute_metrics(EvalPrediction) -> {name: float}: scores an evaluation; `settings.eval.
          metric` names the key that picks the best checkpoint ("loss" needs no hook).
      preprocess_logits(outputs, batch) -> tensor | tuple: what to keep of each eval batch,
          one row per example (default: outputs.logits).
      label_keys: batch keys handed to compute_metrics as label_ids (QA: start/end_positions).
      loss_units(batch) -> int: how many things the model's mean loss averages over in a
          batch; data-parallel runs weight each process's loss by its share of them. Default
          `count_loss_units`: the entries of the first label_keys tensor that are not -100
          (examples, packed sequences, labelled tokens); a loss averaged per sequence over
          token labels (a CRF) counts sequences instead: `lambda b: len(b["labels"])`.
      eval_collate_fn: collator for eval/predict when training packs sequences.
      batch_sampler: a ready EpochBatchSampler for THIS process, replacing the one that
          settings.data.batching would build (set_epoch + deterministic order per epoch, the
          same number of batches on every process).
      run_files: names of the files and directories the caller itself writes into
          output_dir (e.g. "recipe.yaml", "tokenizer"): with the engine's own files they are
          what a run that died before its first checkpoint leaves, and such a directory is
          started again instead of refused.
      callbacks: objects with any of on_train_start(trainer, state) (the output directory is
          taken, fresh or resumed; before the first step), on_step_end(trainer, state),
          on_evaluate(trainer, state, metrics), on_train_end(trainer, state);
          `trainer.request_stop()` from a callback stops like SIGTERM. on_train_end runs once
          the final model (the best checkpoint's, with load_best_at_end) is saved in model/ and every
          process still takes part: the place for a last `trainer.evaluate(dataset)` (the same
          evaluation as in training).
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
        loss_units: Callable[[Mapping[str, Any]], int | None] | None = None,
        run_files: Sequence[str] = (),
        saved_with_model: Sequence[Any] = (),
        callbacks: Sequence[Any] = (),
    ) -> None:
        self.settings = settings
        _check_metric_hook(settings, compute_metrics, eval_dataset)
        self.output_dir = Path(settings.output_dir)
        check_output_dir(self.output_dir)
        self.accelerator = _make_accelerator(settings)
        _check_global_batch(settings, self.accelerator.num_processes)
        # how the loop runs over processes (nlp.train.strategies): the loop never asks which
        self.strategy = build_strategy(settings, self.accelerator)
        if settings.gradient_checkpointing:
            _enable_gradient_checkpointing(model)
        self.model = model
        self.train_dataset, self.collate_fn = train_dataset, collate_fn
        self.eval_dataset = eval_dataset
        self.eval_collate_fn = eval_collate_fn or collate_fn
        self.compute_metrics, self.preprocess_logits = compute_metrics, preprocess_logits
        self.label_keys, self.callbacks = tuple(label_keys), list(callbacks)
        self.loss_units = loss_units or functools.partial(count_loss_units, label_keys=self.label_keys)
        self.run_files = tuple(run_files)
        self.saved_with_model = tuple(saved_with_model)  # e.g. the tokenizer: in model/ before it is visible
        self.sampler = batch_sampler or self._build_sampler(lengths)
        if len(self.sampler) == 0:
            raise ConfigError(
                f"the training set ({len(train_dataset)} examples) gives no batch of "
                f"data.batch_size={settings.data.batch_size} (data.drop_last={settings.data.drop_last})"
            )
        self._set_up_optimization(model)
        self.checkpoints = CheckpointManager(
            self.output_dir / "checkpoints",
            is_main=self.accelerator.is_main_process,
            rank=self.accelerator.process_index,
            barrier=self.accelerator.wait_for_everyone,
            agree=self._agree,
            strategy=self.strategy,
        )
        self._stop_signal: int | None = None
        self._stop_requested = False
        self._window = LogWindow()  # what the training log has summed since its last record
        self._last_saved_step = -1

    # ------------------------------------------------------------------ the loop

    def train(self) -> TrainResult:
        with self._ended_on_error():
            state = self._begin()
            self._run_callbacks("on_train_start", state)
            log = self._open_log(state)
            started, session_tokens = time.perf_counter(), 0
            status = "finished"
            with stop_on_signals(self._on_signal), contextlib.closing(log):
                while state.step < self.total_steps and status == "finished":
                    for n_micro, batches in self._epoch_steps(state):
                        loss, tokens, grad_norm = self._train_step(n_micro, batches, state)
                        state.step += 1
                        self._liveness.step = state.step
                        state.batches_in_epoch += n_micro
                        session_tokens += tokens
                        self._log_step(log, state, loss, grad_norm, tokens)
                        epoch_end = state.batches_in_epoch >= len(self.sampler)
                        if self._eval_due(state, epoch_end):  # evaluates, then saves a checkpoint
                            if self._evaluate_and_track(log, state, started, session_tokens):
                                status = "early_stopping"
                        elif self._checkpoint_due(state, epoch_end):
                            self._save(state)
                        self._run_callbacks("on_step_end", state)
                        if self._should_stop():
                            self._interrupt(state, started, session_tokens)
                        if state.step >= self.total_steps or status != "finished":
                            break
                    else:  # the epoch ran out: the next one starts at its first batch
                        state.epoch, state.batches_in_epoch = state.epoch + 1, 0
                return self._finish(state, status, started, session_tokens)

    @contextlib.contextmanager
    def _ended_on_error(self) -> Iterator[None]:
        """A run that fails (a refused output directory, a diverged loss) lets its strategy free
        what must not outlive it (an engine, a process group made for a one-process run); a
        finished or interrupted run has ended it already. A collective that timed out (another
        process hangs) becomes a TrainingError naming the process that stopped answering."""
        acc, timeout = self.accelerator, self.settings.distributed.timeout_s
        self._liveness = Liveness(acc.process_index, acc.num_processes, interval=min(10.0, max(0.2, timeout / 5)))
        if acc.num_processes > 1:
            self._liveness.start()
        try:
            yield
        except BaseException as err:
            self.strategy.abort()
            why = self._liveness.explain(err, timeout) if acc.num_processes > 1 else None
            if why is not None:
                raise TrainingError(why) from err
            raise
        finally:
            self._liveness.stop()

    @property
    def _model(self) -> Any:
        """The model the loop calls: whatever the strategy made of it (a wrapper, shards, an engine)."""
        return self.strategy.model

    def _epoch_steps(self, state: TrainerState) -> Iterator[tuple[int, Iterator[dict]]]:
        """Yield (number of micro-batches, their iterator) per optimizer step of this epoch,
        starting at the saved position inside it (a number of global batches)."""
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
        micro = list(batches)
        weights = self._loss_weights(micro)
        total, tokens = torch.zeros((), device=acc.device), 0
        for i, batch in enumerate(micro):
            # Gradients are all-reduced only on the last micro-batch of the step.
            with self.strategy.no_sync() if i < n - 1 else contextlib.nullcontext():
                loss = _loss_of(model(**batch))
                if weights is not None:
                    loss = loss * weights[i]
                self.strategy.backward(loss / n)
            total += loss.detach().float()
            tokens += _count_tokens(batch)
        loss = total / n
        if self._agree(not bool(torch.isfinite(loss))):
            self.strategy.drop_gradients()
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
        _, grad_norm = self.strategy.step(self.settings.optim.max_grad_norm)  # clip, update, schedule
        return loss.item(), tokens, grad_norm

    def _loss_weights(self, micro: list[Mapping[str, Any]]) -> list[float] | None:
        """Per micro-batch: the number of processes times this process's share of the global
        micro-batch's loss units (None with one process: nothing to weight).

        The model's loss is a mean over this process's units (examples, or labelled tokens);
        data-parallel averages the gradients over processes. Weighted so, the average is the
        mean over the global batch: what one process computes on it, even when the processes
        hold different numbers of labelled tokens or packed sequences."""
        acc = self.accelerator
        if acc.num_processes == 1:
            return None
        units = [self.loss_units(b) for b in micro]
        known = [float(u) if u is not None else 0.0 for u in units]
        t = torch.tensor(known + [float(None in units)], dtype=torch.float64, device=acc.device)
        t = acc.reduce(t, "sum")
        *global_units, unknown = t.tolist()
        if unknown:  # no label tensor to count: each process's mean counts the same
            return [1.0] * len(micro)
        return [acc.num_processes * u / g if g else 1.0 for u, g in zip(known, global_units)]

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
            equal_batches=self.strategy.forward_is_collective(),
        )

    def request_stop(self) -> None:
        """Stop at the end of the current step, after saving a resumable checkpoint."""
        self._stop_requested = True

    def save_model(self, directory: str | Path) -> Path:
        """Export the (unwrapped) model: save_pretrained when the model has it, else
        model.safetensors, plus each of `saved_with_model`'s save_pretrained (the tokenizer).
        The directory is written whole under a temporary name and renamed into place, so a reader
        never sees a half model (a model without its tokenizer files); a model directory this run
        saved before is replaced. Main process only; the others wait (a sharded model is first
        gathered into the main process's CPU memory, every process taking part)."""
        directory = Path(directory)
        model, full = self.strategy.final_model(), self.strategy.full_state()
        if self.accelerator.is_main_process:
            with atomic_directory(directory) as tmp:
                _save_weights(model, tmp, full)
                for extra in self.saved_with_model:
                    extra.save_pretrained(tmp)
        self.accelerator.wait_for_everyone()
        return directory

    # ------------------------------------------------------------------ set-up

    def _build_sampler(self, lengths: Sequence[int] | None) -> EpochBatchSampler:
        """settings.data.batching's sampler: global batches of data.batch_size planned from
        (seed, epoch), this process taking its share of each (nlp.tokenizer.samplers)."""
        s, acc = self.settings, self.accelerator
        common = dict(shuffle=s.data.shuffle, seed=s.seed, num_replicas=acc.num_processes,
                      rank=acc.process_index, drop_last=s.data.drop_last)
        if s.data.batching == "dynamic":
            sampler: EpochBatchSampler = DistributedBatchSampler(len(self.train_dataset), s.data.batch_size, **common)
        else:
            if lengths is None:
                lengths = [len(ex["input_ids"]) for ex in self.train_dataset]
            if s.data.batching == "packed":  # the task layer passes a PackingCollator
                sampler = PackedBatchSampler(lengths, s.data.pack_max_length, s.data.batch_size, **common)
            else:
                sampler = LengthGroupedBatchSampler(lengths, s.data.batch_size, **common)
        return sampler

    def _set_up_optimization(self, model: torch.nn.Module) -> None:
        """Steps, then the model handed to the strategy, which wraps or shards it and builds the
        optimizer and schedule on what it made of it."""
        s = self.settings
        self.steps_per_epoch = math.ceil(len(self.sampler) / s.grad_accum_steps)
        self.total_steps = s.max_steps or math.ceil(s.epochs * self.steps_per_epoch)

        def make_optimizer(m: torch.nn.Module) -> tuple[torch.optim.Optimizer, Any]:
            optimizer = build_optimizer(m, s.optim)
            return optimizer, build_scheduler(optimizer, s.schedule, self.total_steps)

        _, self.optimizer, self.scheduler = self.strategy.prepare(model, make_optimizer)

    def _begin(self) -> TrainerState:
        """Apply the output-directory policy: resume its last checkpoint, or start fresh in an
        empty/new directory (or one that a run died in before its first checkpoint), or
        refuse: never overwrite a run silently. Then seed (or restore) the RNGs."""
        s, acc = self.settings, self.accelerator
        resume_from = self._resume_target()
        acc.wait_for_everyone()  # every process decides before the main one writes anything
        state = TrainerState(world_size=acc.num_processes)
        if resume_from is None:
            set_seed(s.seed)
            refused = None
            if acc.is_main_process:
                try:
                    claim_output_dir(self.output_dir, to_dict(s))
                except ConfigError as err:
                    refused = err
            if self._agree(refused is not None):  # every process stops, not only the main one
                raise refused or ConfigError(f"the main process could not take output_dir {self.output_dir}")
        else:
            state = self._resume(resume_from)
        if s.log.tensorboard:
            require("tensorboard", "TensorBoard logs (log.tensorboard: true; false trains without them)")
            acc.init_trackers("tensorboard", config=_flat_hparams(to_dict(s)))
        self._last_saved_step = state.step if resume_from is not None else -1
        self._window = LogWindow.from_state(state.log_window if acc.is_main_process else {})
        return state

    def _resume(self, checkpoint: Path) -> TrainerState:
        s, acc = self.settings, self.accelerator
        self._warn_changed_settings()
        state, rng = self.checkpoints.load(checkpoint, scheduler=self.scheduler)
        if state.world_size != acc.num_processes or rng is None:
            logger.warning(
                "resuming a run saved with %d processes on %d: the data order is kept, but "
                "dropout masks will differ from an unbroken run",
                state.world_size, acc.num_processes,
            )
            set_seed(s.seed + state.step)
        else:
            restore_rng(rng)
        # the log's window was summed over the processes that saved it
        state.log_window = LogWindow.resized(state.log_window, state.world_size, acc.num_processes)
        state.world_size = acc.num_processes
        logger.info("resumed from %s at step %d (epoch %d)", checkpoint, state.step, state.epoch)
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
        if out.is_dir() and any(out.iterdir()):
            leftovers, foreign = leftovers_of_a_dead_run(out, self.run_files)
            if foreign:
                raise ConfigError(
                    f"output_dir {out} is not empty and holds no checkpoint to resume (it holds "
                    f"{', '.join(foreign[:5])}{', ...' if len(foreign) > 5 else ''}); refusing to "
                    "overwrite it. Pick another output_dir, or delete this one."
                )
            logger.warning(
                "output_dir %s holds only what a run left before its first checkpoint (%s); "
                "starting that run again", out, ", ".join(leftovers),
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

    def _sum_over_processes(self, values: list[float]) -> list[float]:
        if self.accelerator.num_processes == 1:
            return values
        t = torch.tensor(values, device=self.accelerator.device, dtype=torch.float64)
        return self.accelerator.reduce(t, "sum").tolist()

    def _log_step(self, log: RunLog, state: TrainerState, loss: float, grad_norm: float | None,
                  tokens: int) -> None:
        w = self._window
        w.add(loss, tokens)
        if state.step % self.settings.log.every_steps and state.step != self.total_steps:
            return
        loss_sum, n, tok = self._sum_over_processes([w.loss_sum, float(w.loss_steps), float(w.tokens)])
        state.tokens_seen += int(tok)
        record = {
            "type": "train",
            "step": state.step,
            "epoch": round(state.epoch + state.batches_in_epoch / len(self.sampler), 4),
            "loss": loss_sum / n if n else float("nan"),
            "lr": self.scheduler.get_last_lr()[0],
            "grad_norm": grad_norm,
            "tokens_per_s": tok / max(w.seconds(), 1e-9),
        }
        log.write(record)
        log.progress(state.step, loss=f"{record['loss']:.4f}", lr=f"{record['lr']:.2e}",
                     tok_s=f"{record['tokens_per_s']:.0f}")
        self._window = LogWindow()

    def _eval_due(self, state: TrainerState, epoch_end: bool) -> bool:
        e = self.settings.eval
        if self.eval_dataset is None:
            return False
        return bool((e.every_steps and state.step % e.every_steps == 0) or (epoch_end and e.at_epoch_end)
                    or state.step == self.total_steps)

    def _checkpoint_due(self, state: TrainerState, epoch_end: bool) -> bool:
        every = self.settings.checkpoint.every_steps
        return bool(epoch_end or (every and state.step % every == 0))

    def _evaluate_and_track(self, log: RunLog, state: TrainerState, started: float, tokens: int) -> bool:
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
        if not math.isfinite(value):
            self._write_report(state, "failed", started, tokens)
            raise TrainingError(
                f"the evaluation at step {state.step} gave {e.metric}={value}: the model no longer "
                "computes finite outputs (diverged). Lower optim.lr, set optim.max_grad_norm, or "
                "check the data; the run is not resumable from here (delete output_dir or pick another)"
            )
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
        w = self._window
        loss_sum, n, tok = self._sum_over_processes([w.loss_sum, float(w.loss_steps), float(w.tokens)])
        state.log_window = LogWindow(loss_sum, int(n), int(tok)).to_state(w.seconds())
        path = self.checkpoints.save(state, scheduler=self.scheduler, keep_last=self.settings.checkpoint.keep_last)
        self._last_saved_step = state.step
        return path

    def _end_process_group(self) -> None:
        self._liveness.stop()  # it writes into the group's store
        self.strategy.end()

    def _on_signal(self, signum: int) -> None:
        self._stop_signal = signum
        self._stop_requested = True

    def _should_stop(self) -> bool:
        return self._agree(self._stop_requested)

    def _interrupt(self, state: TrainerState, started: float, tokens: int) -> None:
        path = self._save(state) if self._last_saved_step != state.step else self.checkpoints.latest()
        self._write_report(state, "interrupted", started, tokens)
        self._end_process_group()
        what = "a stop request" if self._stop_signal is None else f"signal {self._stop_signal}"
        raise TrainingInterrupted(
            f"stopped by {what} at step {state.step}/{self.total_steps}; checkpoint {path}. Run "
            "again with the same settings (resume=auto) to continue.",
            checkpoint=path,
            signum=self._stop_signal,
        )

    def _finish(self, state: TrainerState, status: str, started: float, tokens: int) -> TrainResult:
        if self._last_saved_step != state.step:
            self._save(state)
        best = self.output_dir / "checkpoints" / state.best_checkpoint if state.best_checkpoint else None
        if self.settings.checkpoint.load_best_at_end and best is not None and state.best_step != state.step:
            self.checkpoints.load_model(best)
            logger.info("loaded the best model (step %d) from %s", state.best_step, best)
        broken = self.strategy.nonfinite_parameters()
        if self._agree(bool(broken)):  # a sharded model: each process checks its shards
            self._write_report(state, "failed", started, tokens)
            raise TrainingError(
                f"after {state.step} steps the model's parameters hold NaN/inf ({', '.join(broken[:3])}"
                f"{', ...' if len(broken) > 3 else ''}): training diverged. Lower optim.lr, set "
                "optim.max_grad_norm, or check the data"
            )
        model_dir = self.save_model(self.output_dir / "model")
        summary = self._write_report(state, status, started, tokens)
        self._run_callbacks("on_train_end", state)
        self._end_process_group()
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


# ---------------------------------------------------------------------- set-up helpers


def _save_weights(model: torch.nn.Module, directory: Path, full: Mapping[str, torch.Tensor] | None) -> None:
    import safetensors.torch

    if hasattr(model, "save_pretrained"):
        model.save_pretrained(directory, **({} if full is None else {"state_dict": full}))
    elif full is not None:
        safetensors.torch.save_file({k: v.contiguous() for k, v in full.items()}, str(directory / "model.safetensors"))
    else:
        safetensors.torch.save_model(model, str(directory / "model.safetensors"))


def _check_metric_hook(s: TrainSettings, compute_metrics: ComputeMetrics | None, eval_dataset: Any) -> None:
    if s.eval.metric != "loss" and compute_metrics is None and eval_dataset is not None:
        raise ConfigError(
            f"eval.metric={s.eval.metric!r} needs a compute_metrics function; without one "
            "only eval.metric=loss is available"
        )


def _make_accelerator(s: TrainSettings) -> Accelerator:
    """The Accelerator for these settings: device, mixed precision, trackers; plain
    data-parallel only."""
    use_cuda = torch.cuda.is_available() and not s.cpu
    check_distributed_backend(use_cuda)
    _fresh_accelerator_state()
    precision = resolve_mixed_precision(s.mixed_precision, use_cuda=use_cuda)
    if precision == "bf16" and not use_cuda:
        limit_onednn_cache()
    acc = Accelerator(
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
    check_launcher(acc)
    return acc


def _check_global_batch(s: TrainSettings, processes: int) -> None:
    if s.data.batch_size % processes:
        raise ConfigError(
            f"data.batch_size={s.data.batch_size} is the global batch and must be divisible "
            f"by the {processes} processes; try "
            f"{s.data.batch_size // processes * processes or processes}"
        )


def _enable_gradient_checkpointing(model: torch.nn.Module) -> None:
    if not hasattr(model, "gradient_checkpointing_enable"):
        raise ConfigError(
            f"gradient_checkpointing=true, but {type(model).__name__} has no "
            "gradient_checkpointing_enable(); set gradient_checkpointing=false"
        )
    model.gradient_checkpointing_enable()


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


# ---------------------------------------------------------------------- batch helpers


def _loss_of(outputs: Any) -> torch.Tensor:
    loss = outputs.get("loss") if isinstance(outputs, Mapping) else getattr(outputs, "loss", None)
    if loss is None:
        raise TrainingError(
            "the model returned no loss: training batches must carry the labels "
            "(e.g. a 'labels' key) so that forward(**batch) computes .loss"
        )
    return loss


def count_loss_units(batch: Mapping[str, Any], label_keys: Sequence[str] = ("labels",)) -> int | None:
    """How many things the model's mean loss averages over in this batch: the entries of the
    first label tensor that are not -100 (examples, packed sequences, or labelled tokens);
    float targets count every entry. None when the batch has no label tensor."""
    for key in label_keys:
        labels = batch.get(key)
        if torch.is_tensor(labels):
            return labels.numel() if labels.is_floating_point() else int(labels.ne(-100).sum())
    return None


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
