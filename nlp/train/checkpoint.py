"""Resumable checkpoints, written atomically, with rotation.

Layout of one checkpoint, OUTPUT_DIR/checkpoints/step-00000120/:
  model.safetensors        the (unwrapped) model's parameters and buffers
  optimizer.pt             optimizer state (+ the fp16 loss scaler's, when there is one)
  scheduler.pt             learning-rate scheduler state
  rng_state_rank{r}.pt     python / numpy / torch / cuda RNG states of process r
  trainer_state.json       step, epoch, position inside the epoch, best metric, ... (written
                           last: a directory without it is not a checkpoint)
A distributed strategy other than plain data-parallel writes its own model and optimizer state
in place of model.safetensors and optimizer.pt (nlp.train.strategies: every process writing its
shards or partitions, in a directory that marks the strategy's format).

Why atomic: everything is written into checkpoints/.tmp-step-00000120 and renamed into place
only when complete, so a crash (or a second Ctrl-C) while saving leaves the previous
checkpoints intact and never a half-written one that resume would pick. A write that fails
(disk full, read-only) raises `CheckpointWriteError` on every process, naming the checkpoint,
the cause and the previous checkpoint that is still there. Everything is read back
with `torch.load(weights_only=True)`: no arbitrary pickle.
"""

from __future__ import annotations

import json
import logging
import random
import re
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
import safetensors.torch  # noqa: F401  (the tests fail writes through it: nlp.train.checkpoint.safetensors)
import torch

from nlp._common import ConfigError, atomic_write, publish_directory, shared_sibling, temporary_sibling
from nlp.train.strategies import Strategy, format_of
from nlp.train.errors import CheckpointWriteError
from nlp.train.run_dir import describe_os_error

__all__ = ["TrainerState", "CheckpointManager", "capture_rng", "restore_rng"]

logger = logging.getLogger(__name__)

_NAME = re.compile(r"^step-(\d{8,})$")
STATE_FILE = "trainer_state.json"


@dataclass
class TrainerState:
    """The loop's bookkeeping; with the files above it is everything a resume needs."""

    step: int = 0  # optimizer steps done
    epoch: int = 0  # the epoch in progress
    batches_in_epoch: int = 0  # micro-batches of `epoch` already consumed (sampler position)
    best_metric: float | None = None
    best_step: int | None = None
    best_checkpoint: str | None = None  # directory name under checkpoints/
    evals_without_improvement: int = 0
    nonfinite_streak: int = 0
    tokens_seen: int = 0
    train_seconds: float = 0.0  # wall time spent in earlier sessions of this run
    world_size: int = 1
    log_history_step: int = 0  # last step written to metrics.jsonl
    log_window: dict[str, Any] = field(default_factory=dict)  # the log's running sums (tracking.LogWindow)
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, text: str) -> "TrainerState":
        data = json.loads(text)
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        return cls(**known)


def capture_rng() -> dict[str, Any]:
    """RNG states as tensors and plain values (loadable with weights_only=True)."""
    version, mt, gauss = random.getstate()
    kind, keys, pos, has_gauss, cached = np.random.get_state()
    state: dict[str, Any] = {
        "python": {"version": version, "state": list(mt), "gauss": gauss},
        "numpy": {
            "kind": kind,
            "keys": torch.from_numpy(keys.astype(np.int64)),
            "pos": int(pos),
            "has_gauss": int(has_gauss),
            "cached": float(cached),
        },
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore_rng(state: dict[str, Any]) -> None:
    p = state["python"]
    random.setstate((p["version"], tuple(p["state"]), p["gauss"]))
    n = state["numpy"]
    np.random.set_state(
        (n["kind"], n["keys"].numpy().astype(np.uint32), n["pos"], n["has_gauss"], n["cached"])
    )
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def _load(path: Path) -> Any:
    return torch.load(path, map_location="cpu", weights_only=True)


class CheckpointManager:
    """Save / find / load / rotate the checkpoints of one run directory.

    Every process calls `save`: each writes its own RNG state and its part of the model and
    optimizer state (the run's `strategy` decides what that part is); the main process writes
    the rest and renames. `barrier` is the accelerator's wait_for_everyone; `agree(flag)` is
    true on every process when it is true on any (default: one process), so that a failed
    write stops every process, not only the one that failed. `strategy` is None for a manager
    that only lists checkpoints.
    """

    def __init__(self, root: Path, *, is_main: bool, rank: int, barrier: Callable[[], None],
                 agree: Callable[[bool], bool] | None = None, strategy: Strategy | None = None):
        self.root, self.is_main, self.rank, self.barrier = Path(root), is_main, rank, barrier
        self.agree = agree or (lambda flag: flag)
        self.strategy = strategy

    def list(self) -> list[Path]:
        """Complete checkpoints, oldest first."""
        if not self.root.is_dir():
            return []
        found = []
        for p in self.root.iterdir():
            m = _NAME.match(p.name)
            if m and (p / STATE_FILE).is_file():
                found.append((int(m.group(1)), p))
        return [p for _, p in sorted(found)]

    def latest(self) -> Path | None:
        ckpts = self.list()
        return ckpts[-1] if ckpts else None

    def save(
        self,
        state: TrainerState,
        *,
        scheduler: Any,
        keep_last: int,
    ) -> Path:
        final = self.root / f"step-{state.step:08d}"
        tmp = shared_sibling(final)  # every process writes into it
        previous = self.latest()
        try:
            failure = self._attempt(temporary_sibling, final, shared=True) if self.is_main else None
            if not self.agree(failure is not None):
                failure = self._attempt(torch.save, capture_rng(), tmp / f"rng_state_rank{self.rank}.pt")
            if not self.agree(failure is not None):  # may be a collective: every process
                failure = self._attempt(self.strategy.save, tmp)
            if not self.agree(failure is not None) and self.is_main:
                failure = self._attempt(self._complete, tmp, final, state, scheduler)
            if self.agree(failure is not None):
                raise self._write_error(final, previous, failure)
        except BaseException:  # the temp directory goes; earlier checkpoints stay
            if self.is_main:
                shutil.rmtree(tmp, ignore_errors=True)
            raise
        self._rotate_if_main(keep_last, state.best_checkpoint, final.name)
        self.barrier()
        logger.info("saved checkpoint %s", final)
        return final

    @staticmethod
    def _attempt(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> BaseException | None:
        """Run a write; return the error of a failed one (disk full, read-only, ...)."""
        from torch.distributed.checkpoint import CheckpointException  # a BaseException

        try:
            fn(*args, **kwargs)
        except (OSError, RuntimeError, CheckpointException) as err:  # torch.save: RuntimeError
            return err
        return None

    def _complete(self, tmp: Path, final: Path, state: TrainerState, scheduler: Any) -> None:
        self._write_main_files(tmp, state, scheduler)
        publish_directory(tmp, final)  # replaces the same step saved again (e.g. eval, then interrupt)

    def _rotate_if_main(self, keep_last: int, best: str | None, newest: str) -> None:
        if self.is_main:
            self._rotate(keep_last, best, newest)

    def _write_error(self, final: Path, previous: Path | None, failure: BaseException | None) -> CheckpointWriteError:
        if failure is None:
            cause = "another process could not write its part"
        elif isinstance(failure, OSError):
            cause = describe_os_error(failure)
        else:
            cause = str(failure).splitlines()[0] if str(failure) else type(failure).__name__
        kept = (f"the previous checkpoint {previous} is intact; run the same command again to continue "
                "from it" if previous is not None else
                "there is no earlier checkpoint; run the same command again to start over")
        err = CheckpointWriteError(f"could not write checkpoint {final}: {cause}. Nothing was lost: {kept} "
                                   "once the cause (e.g. a full disk) is fixed.")
        err.__cause__ = failure
        return err

    def _write_main_files(self, tmp: Path, state: TrainerState, scheduler: Any) -> None:
        torch.save(scheduler.state_dict(), tmp / "scheduler.pt")
        with atomic_write(tmp / STATE_FILE, "w", encoding="utf-8") as f:
            json.dump(asdict(state) | {"checkpoint": tmp.name.removeprefix(".tmp-")}, f, indent=2)

    def _rotate(self, keep_last: int, best: str | None, newest: str) -> None:
        ckpts = self.list()
        keep = {p.name for p in ckpts[-keep_last:]} | {best, newest}
        for p in ckpts:
            if p.name not in keep:
                shutil.rmtree(p, ignore_errors=True)
                logger.debug("removed old checkpoint %s", p)

    def load(self, path: Path, *, scheduler: Any) -> tuple[TrainerState, dict[str, Any] | None]:
        """Load everything but the RNG states (the model and optimizer state through the
        strategy, the schedule); return the trainer state and this process's RNG state (restore
        it last, right before training goes on)."""
        path = Path(path)
        if not (path / STATE_FILE).is_file():
            raise ConfigError(
                f"{path} is not a complete checkpoint (no {STATE_FILE}). Checkpoints are the "
                f"step-NNNNNNNN directories under OUTPUT_DIR/checkpoints."
            )
        state = TrainerState.from_json((path / STATE_FILE).read_text(encoding="utf-8"))
        self._check_format(path)
        self.strategy.load(path, saved_world_size=state.world_size)
        scheduler.load_state_dict(_load(path / "scheduler.pt"))
        rng_file = path / f"rng_state_rank{self.rank}.pt"
        return state, _load(rng_file) if rng_file.is_file() else None

    def load_model(self, path: Path) -> None:
        """Only the model's weights (the best checkpoint's, at the end of a run); every process
        calls it."""
        self._check_format(Path(path))
        self.strategy.load_model(Path(path))

    def _check_format(self, path: Path) -> None:
        written_by, holds = format_of(path)
        if written_by != self.strategy.name:
            found = f"train.distributed.strategy={written_by} ({holds})" if written_by else "no known strategy"
            raise ConfigError(
                f"checkpoint {path} was written by {found}; this run has "
                f"strategy={self.strategy.name}. Resume it with "
                f"train.distributed.strategy={written_by or 'THE_ONE_THAT_WROTE_IT'}, or start a new output_dir"
            )
