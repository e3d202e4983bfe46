"""Model and optimizer state of a checkpoint through `torch.distributed.checkpoint` (DCP).

Used by `train.distributed.strategy: fsdp` (nlp.train.sharding). Every process writes its own
shards of the parameters and of AdamW's state into the checkpoint's `sharded/` directory
(`__R_0.distcp` per rank, plus `.metadata`, which describes every tensor as a whole); nobody
gathers the model. The rest of a checkpoint (scheduler, RNG states, trainer_state.json) and its
atomicity (written under `.tmp-step-N`, renamed when complete) are CheckpointManager's, as for
plain data-parallel runs.

DCP saves each tensor with its global shape and reads back whatever piece the loading process
owns, so a checkpoint written by N processes loads on M (2 -> 1, 1 -> 2): the state dicts come
from `get_state_dict`, which names optimizer state by parameter name (not by position) and gives
DTensor shards for a sharded model and plain tensors for a whole one.
"""

from __future__ import annotations

import contextlib
import warnings
from pathlib import Path
from typing import Iterator

import torch
from torch import nn

__all__ = ["SHARDED_DIR", "is_sharded_checkpoint", "save_sharded", "load_sharded", "load_sharded_model"]

SHARDED_DIR = "sharded"


def is_sharded_checkpoint(checkpoint: Path) -> bool:
    return (Path(checkpoint) / SHARDED_DIR / ".metadata").is_file()


def save_sharded(directory: Path, model: nn.Module, optimizer: torch.optim.Optimizer) -> None:
    """Write this process's shards of the model and optimizer state under `directory`. Every
    process must call it (a collective); a failed write on any process raises on all of them."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict

    model_state, optim_state = get_state_dict(model, optimizer)
    with _one_process() as no_dist:
        dcp.save({"model": model_state, "optimizer": optim_state}, checkpoint_id=str(directory), no_dist=no_dist)


def load_sharded(directory: Path, model: nn.Module, optimizer: torch.optim.Optimizer) -> None:
    """Load model and optimizer state written by `save_sharded`, on any number of processes."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

    model_state, optim_state = get_state_dict(model, optimizer)  # the shapes and shards to fill
    state = {"model": model_state, "optimizer": optim_state}
    with _one_process() as no_dist:
        dcp.load(state, checkpoint_id=str(directory), no_dist=no_dist)
    set_state_dict(model, optimizer, model_state_dict=state["model"], optim_state_dict=state["optimizer"])


def load_sharded_model(directory: Path, model: nn.Module) -> None:
    """Load only the model's state (the best checkpoint's weights at the end of a run)."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_model_state_dict, set_model_state_dict

    state = {"model": get_model_state_dict(model)}
    with _one_process() as no_dist:
        dcp.load(state, checkpoint_id=str(directory), no_dist=no_dist)
    set_model_state_dict(model, state["model"])


@contextlib.contextmanager
def _one_process() -> Iterator[bool]:
    """Yields DCP's `no_dist`: true in a process without a process group (a one-process run),
    where DCP's warning that it assumes so says nothing new."""
    alone = not (torch.distributed.is_available() and torch.distributed.is_initialized())
    with warnings.catch_warnings():
        if alone:
            warnings.filterwarnings("ignore", message="torch.distributed is disabled")
        yield alone
