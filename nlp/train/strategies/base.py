"""The interface every training strategy implements (nlp.train.strategies).

The Trainer hands a strategy its model once (`prepare`) and from then on calls these methods
in the loop's order, without asking which strategy runs:

    model, optimizer, scheduler = strategy.prepare(model, make_optimizer)
    with strategy.no_sync(): strategy.backward(loss / n)     # every micro-batch but the last
    applied, grad_norm = strategy.step(max_norm)             # clip, update, schedule, zero_grad
    strategy.save(tmp) / strategy.load(checkpoint, ...)      # model and optimizer state
    strategy.final_model(), strategy.full_state()            # what `model/` is written from
    strategy.end()                                           # drop what holds the group, end it

A checkpoint's scheduler, RNG states and trainer_state.json, and its atomicity, are
CheckpointManager's; a strategy writes only its model and optimizer state, into the directory
it is given, and names the file or directory that marks its format (`checkpoint_marker`).
"""

from __future__ import annotations

import contextlib
import gc
import logging
from datetime import timedelta
from pathlib import Path
from typing import Any, Callable, ClassVar, ContextManager

import torch

from nlp._common import ConfigError

__all__ = ["Strategy", "MakeOptimizer", "set_collective_timeout"]

logger = logging.getLogger(__name__)

# model -> (optimizer, scheduler): the Trainer's AdamW and schedule, built on whatever parameters
# the strategy gives the model (whole, or its shards)
MakeOptimizer = Callable[[torch.nn.Module], "tuple[torch.optim.Optimizer, Any]"]


class Strategy:
    """One way of running the loop over 1..N processes. Subclasses set `name` and
    `checkpoint_marker` and implement the methods that raise NotImplementedError; the others
    have the plain single-module behaviour."""

    name: ClassVar[str] = ""
    checkpoint_marker: ClassVar[str] = ""  # relative path inside a checkpoint that only this strategy writes

    def __init__(self, settings: Any, accelerator: Any) -> None:
        self.settings, self.accelerator = settings, accelerator
        self.model: Any = None  # what the loop calls (a wrapper, a sharded module, an engine)
        self.optimizer: Any = None
        self.scheduler: Any = None

    # ------------------------------------------------------------------ set-up

    def check(self) -> None:
        """Refuse what cannot work, naming the setting and the fix, before the model is touched."""
        if self.settings.distributed.cpu_offload:
            raise ConfigError("train.distributed.cpu_offload=true applies to strategy=fsdp only; "
                              "set train.distributed.strategy=fsdp or cpu_offload=false")

    def prepare(self, model: torch.nn.Module, make_optimizer: MakeOptimizer) -> tuple[Any, Any, Any]:
        """Place / wrap / shard the model, build the optimizer and schedule on it; returns
        (model, optimizer, scheduler) and keeps them."""
        raise NotImplementedError

    # ------------------------------------------------------------------ a step

    def no_sync(self) -> ContextManager:
        """Accumulate this micro-batch's gradients without reducing them across processes."""
        return contextlib.nullcontext()

    def backward(self, loss: torch.Tensor) -> None:
        raise NotImplementedError

    def step(self, max_norm: float | None) -> tuple[bool, float | None]:
        """Clip (when max_norm is set), update, step the schedule, forget the gradients.
        Returns (applied, the gradient norm before clipping, None unless clipping)."""
        raise NotImplementedError

    def drop_gradients(self) -> None:
        """Forget this step's gradients without an update (a non-finite loss)."""
        self.optimizer.zero_grad(set_to_none=True)

    def forward_is_collective(self) -> bool:
        """True when every process must run as many forward passes as the others (evaluation
        then pads the shorter shares)."""
        return False

    # ------------------------------------------------------------------ checkpoints

    @classmethod
    def wrote(cls, checkpoint: Path) -> bool:
        """Whether `checkpoint` holds this strategy's format."""
        return bool(cls.checkpoint_marker) and (Path(checkpoint) / cls.checkpoint_marker).exists()

    def save(self, directory: Path) -> None:
        """Write this process's part of the model and optimizer state into `directory` (the
        checkpoint's temporary directory). Every process calls it."""
        raise NotImplementedError

    def load(self, checkpoint: Path, *, saved_world_size: int) -> None:
        """Load the model and optimizer state that `save` wrote (on `saved_world_size` processes)."""
        raise NotImplementedError

    def load_model(self, checkpoint: Path) -> None:
        """Load only the model's weights (the best checkpoint's, at the end of a run)."""
        raise NotImplementedError

    # ------------------------------------------------------------------ the end

    def final_model(self) -> torch.nn.Module:
        """The bare module whose weights make the run's `model/`."""
        return self.accelerator.unwrap_model(self.model)

    def full_state(self) -> dict[str, torch.Tensor] | None:
        """The whole model's state dict on the main process (every process takes part), or None
        when `final_model()` holds its whole state here already."""
        return None

    def nonfinite_parameters(self) -> list[str]:
        """Names of the parameters whose part held by this process is not finite."""
        return [name for name, p in self.final_model().named_parameters() if not bool(torch.isfinite(p).all())]

    def abort(self) -> None:
        """A run failed: free what must not outlive it (an engine, a group made for it)."""

    def release(self) -> None:
        """Drop this strategy's own references to the process group (before `end` meets the others)."""

    def end(self) -> None:
        """Drop what holds the process group, meet every process, then end the group.

        Seen as an intermittent SIGABRT ("terminate called without an active exception") of a
        data-parallel CPU run that had finished its work: a gloo group freed during interpreter
        shutdown (its threads still running), or torn down while another process was still
        inside the last collective. So the wrappers, the optimizer's state and the strategy's
        own handles are dropped and collected first, every process then meets at a barrier, and
        the group is destroyed here, not at exit. A sharded model keeps its shards (and the
        group's handle) while the caller holds it; it is freed whenever that reference goes,
        after the group is gone."""
        acc = self.accelerator
        self.release()
        self.model = acc.unwrap_model(self.model)
        acc.free_memory()
        gc.collect()
        acc.wait_for_everyone()
        acc.end_training()


def set_collective_timeout(seconds: float) -> None:
    """How long any collective of this run's process group waits for the slowest process before
    it fails (with an error that `nlp.train` turns into a message naming the process). torch's
    defaults (30 minutes on gloo) let a hung process hold a job that long; a group made before
    the settings were known (accelerate's, when launched) gets the setting here."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return
    from torch.distributed.distributed_c10d import _set_pg_timeout  # no public setter after init

    _set_pg_timeout(timedelta(seconds=seconds))
