"""DeepSpeed ZeRO as a second sharded strategy (`train.distributed.strategy: deepspeed`).

Why it exists beside FSDP2 (nlp.train.sharding): ZeRO-2 splits only the gradients and AdamW's
state over the processes and keeps every parameter whole on each (no gathers in the forward:
less traffic than ZeRO-3 / fsdp, more memory), a trade fsdp has no setting for; ZeRO-3 splits the
parameters too. And a team whose cluster tooling speaks DeepSpeed keeps it.

Everything DeepSpeed does for the trainer lives here: the engine's set-up from the trainer's own
settings, backward and step, checkpoint save/load and the final full state dict. The trainer's
loop stays the same: the same micro-batches and loss weights, the same AdamW (our param groups,
`nlp.train.optim.build_optimizer`) and the same LambdaLR schedule, both handed to
`deepspeed.initialize`, so that the learning rate of every step is the one ddp and fsdp use.

How the loop maps onto the engine:
- gradient accumulation stays the loop's (`loss / n`, the last, shorter group of an epoch
  weighted right): the engine runs with `gradient_accumulation_steps: 1` and
  `managed_gradient_accumulation: false`, so `backward` accumulates (ZeRO reduce-scatters each
  micro-batch's gradients into the partitions) and `step` is the boundary: clipping
  (`gradient_clipping`, by the global norm), AdamW on the fp32 partitions, the schedule.
- mixed precision follows `train.mixed_precision`: bf16 puts the model in bf16 with fp32 master
  partitions (DeepSpeed's `bf16` section; the checkpoints and the final model (model/) stay fp32);
  fp16 is refused, as with fsdp.
- a non-finite loss: the step goes through `engine.step()`, whose own check of the global
  gradient norm (always computed here: clipping is always configured, with an infinite
  threshold when `optim.max_grad_norm` is null) finds it and drops the gradients without an
  update and without a step of the schedule.

Checkpoints: `engine.save_checkpoint` writes every process's partitions into the checkpoint's
`deepspeed/` directory, inside the trainer's atomic scheme (written under `.tmp-step-N`, renamed
when complete). DeepSpeed's partitions are laid out for one number of processes: a resume on
another number is refused (DeepSpeed's offline `ds_to_universal` conversion is not wired in).
The final model is gathered into rank 0's CPU memory in fp32 (`safe_get_full_fp32_param`: the
master weights, whole) and written by `save_pretrained`.

With one process there is still an engine (over a one-process gloo group made here), so that
checkpoints have one format and a one-process run tests the same code.
"""

from __future__ import annotations

import logging
import math
import os
from pathlib import Path
from typing import Any

import torch
from torch import nn

from nlp._common import ConfigError
from nlp._extras import MissingExtraError

__all__ = ["ZERO_DIR", "require_deepspeed", "check_zero",
           "engine_config", "initialize", "is_engine", "backward", "step", "is_zero_checkpoint",
           "check_world_size", "save", "load", "load_model", "full_model_state", "end",
           "partitioned_parameters", "nonfinite_parameters", "memory_per_process"]

logger = logging.getLogger(__name__)

ZERO_DIR = "deepspeed"  # a checkpoint's DeepSpeed directory (the engine's tag)


def require_deepspeed() -> Any:
    """The deepspeed module, or an ImportError that says how to install it."""
    try:
        import deepspeed
    except ImportError as err:
        # the distributed extra (DS_BUILD_OPS=0: no CUDA ops are compiled; it installs with a CPU
        # torch too); train.distributed.strategy=fsdp needs none
        raise MissingExtraError("deepspeed", "train.distributed.strategy=deepspeed (strategy=fsdp needs no extra)") from err
    return deepspeed


def check_zero(*, precision: str) -> None:
    """Refuse what the deepspeed strategy cannot do, before the model is touched."""
    if precision == "fp16":
        raise ConfigError(
            "train.distributed.strategy=deepspeed with mixed_precision=fp16: DeepSpeed's fp16 loss "
            "scaler is not wired into the trainer's loop. Use mixed_precision=bf16 (Ampere+ GPUs, "
            "CPUs with AVX512-BF16/AMX) or no, or strategy=ddp"
        )
    require_deepspeed()


def engine_config(*, stage: int, precision: str, max_grad_norm: float | None,
                  micro_batch_per_process: int) -> dict[str, Any]:
    """The DeepSpeed config for the trainer's settings (see the module docstring)."""
    return {
        # DeepSpeed needs a batch size to check itself against; the loop feeds the batches.
        "train_micro_batch_size_per_gpu": micro_batch_per_process,
        "gradient_accumulation_steps": 1,
        "managed_gradient_accumulation": False,  # the loop's accumulation; step() is the boundary
        # inf: no clipping, but the norm is still computed, so that a non-finite one skips the step
        "gradient_clipping": math.inf if max_grad_norm is None else float(max_grad_norm),
        # stage3_param_persistence_threshold 0: every parameter is partitioned, as fsdp does
        # (DeepSpeed's default, 1e5 elements, keeps the smaller ones whole on every process: in a
        # small model, every layer)
        "zero_optimization": {"stage": stage, "overlap_comm": False, "stage3_param_persistence_threshold": 0},
        "bf16": {"enabled": precision == "bf16"},
        "zero_allow_untested_optimizer": True,  # torch.optim.AdamW is on its list; say it anyway
        "steps_per_print": 2**31 - 1,  # the trainer logs
        "wall_clock_breakdown": False,
    }


def initialize(model: nn.Module, optimizer: torch.optim.Optimizer, scheduler: Any, *, stage: int,
               precision: str, max_grad_norm: float | None, micro_batch_per_process: int) -> Any:
    """The DeepSpeed engine over `model` (already on its device), with our optimizer and schedule.
    Every process must call it; a one-process run gets a one-process group first."""
    deepspeed = require_deepspeed()
    device = next(model.parameters()).device
    _ensure_process_group(device)
    if device.type == "cpu":
        _skip_shared_memory_op()
    config = engine_config(stage=stage, precision=precision, max_grad_norm=max_grad_norm,
                           micro_batch_per_process=micro_batch_per_process)
    engine, _, _, _ = deepspeed.initialize(model=model, optimizer=optimizer, lr_scheduler=scheduler,
                                           config=config, dist_init_required=False)
    return engine


def is_engine(model: Any) -> bool:
    try:
        from deepspeed import DeepSpeedEngine
    except ImportError:
        return False
    return isinstance(model, DeepSpeedEngine)


def backward(engine: Any, loss: torch.Tensor) -> None:
    """Accumulate this micro-batch's gradients (already divided by the loop's micro-batch count)."""
    engine.backward(loss, scale_wrt_gas=False)


def step(engine: Any) -> tuple[bool, float | None]:
    """Clip, update and step the schedule (all inside the engine). Returns (applied, the global
    gradient norm before clipping); a step whose gradients were not finite is not applied."""
    engine.step()
    norm = engine.get_global_grad_norm()
    return engine.was_step_applied(), None if norm is None else float(norm)


def nonfinite_parameters(engine: Any) -> list[str]:
    """Names of the parameters whose part on this process (the ZeRO-3 partition, else the whole
    parameter) holds NaN/inf."""
    return [name for name, p in engine.module.named_parameters()
            if not bool(torch.isfinite(getattr(p, "ds_tensor", p)).all())]


def partitioned_parameters(engine: Any) -> dict[str, dict[str, Any]]:
    """Per parameter: whether ZeRO-3 partitions it (and does not keep it whole as "persistent"),
    the elements of its partition on this process against the whole, and the elements of the
    whole parameter materialised right now (0 between a partitioned layer's uses)."""
    out = {}
    for name, p in engine.module.named_parameters():
        if hasattr(p, "ds_tensor"):
            out[name] = {"partitioned": not getattr(p, "ds_persist", False), "local": p.ds_tensor.numel(),
                         "global": p.ds_numel, "gathered": p.data.numel()}
        else:
            out[name] = {"partitioned": False, "local": p.numel(), "global": p.numel(), "gathered": p.numel()}
    return out


def memory_per_process(engine: Any) -> dict[str, int]:
    """Bytes this process holds for training, counted from the tensors (not measured): the
    model's parameters (ZeRO-3: its partitions), the fp32 master partitions the optimizer updates
    (a copy of the parameters' partition, also in fp32 training), the fp32 gradient partition
    (sized as the master partition: what ZeRO-2/3 keep of the gradients for the step; reduction
    buckets come on top) and AdamW's state."""
    def size(t: torch.Tensor) -> int:
        return t.numel() * t.element_size()

    params = sum(size(getattr(p, "ds_tensor", p)) for p in engine.module.parameters())
    inner = engine.optimizer.optimizer  # our AdamW, on the flat fp32 partitions
    # ZeRO-3 hands its partitions to AdamW only during the step; ZeRO-2 leaves them in the groups
    flat = getattr(engine.optimizer, "fp32_partitioned_groups_flat", None)
    master = sum(size(p) for p in flat) if flat else sum(size(p) for g in inner.param_groups for p in g["params"])
    state = sum(size(v) for st in inner.state.values() for v in st.values() if torch.is_tensor(v))
    return {"parameters": params, "master_weights": master, "gradients": master, "optimizer": state}


# ---------------------------------------------------------------------- checkpoints


def is_zero_checkpoint(checkpoint: Path) -> bool:
    return (Path(checkpoint) / ZERO_DIR).is_dir()


def check_world_size(checkpoint: Path, saved: int, now: int) -> None:
    if saved != now:
        raise ConfigError(
            f"checkpoint {checkpoint} was written by {saved} DeepSpeed processes; this run has {now}. "
            "DeepSpeed's ZeRO partitions are laid out for one number of processes: resume on "
            f"{saved} processes, or, to change the number, use train.distributed.strategy=fsdp "
            "(its checkpoints load on any number) for a new run"
        )


def save(directory: Path, engine: Any) -> None:
    """Every process writes its partitions (and rank 0 the module's file) under `directory`
    (the checkpoint's temporary directory); a collective."""
    engine.save_checkpoint(str(directory), tag=ZERO_DIR, save_latest=False)


def load(directory: Path, engine: Any) -> None:
    """Model, optimizer partitions and schedule, written by `save` on as many processes."""
    _load(directory, engine, optimizer=True)


def load_model(directory: Path, engine: Any) -> None:
    """The weights of a checkpoint (the best one, at the end of a run). The optimizer's fp32
    partitions are loaded too: they are the master weights the final model is gathered from."""
    _load(directory, engine, optimizer=True)


def _load(directory: Path, engine: Any, *, optimizer: bool) -> None:
    path, _ = engine.load_checkpoint(str(directory), tag=ZERO_DIR, load_optimizer_states=optimizer,
                                     load_lr_scheduler_states=optimizer)
    if path is None:
        raise ConfigError(f"{directory / ZERO_DIR} holds no DeepSpeed checkpoint DeepSpeed could load")


# ---------------------------------------------------------------------- the end


def full_model_state(engine: Any, *, is_main: bool) -> dict[str, torch.Tensor]:
    """The whole model's state dict in fp32, gathered into CPU memory on the main process (the
    others get an empty dict): each parameter's master weights from every process's partition
    (`safe_get_full_fp32_param`, a collective per parameter), buffers as they are."""
    from deepspeed.utils import safe_get_full_fp32_param

    state: dict[str, torch.Tensor] = {}
    for name, p in engine.module.named_parameters():
        full = safe_get_full_fp32_param(p)
        if full is None:  # not trained by the optimizer (frozen): the module's own copy
            full = p.detach()
        if is_main:
            state[name] = full.detach().float().cpu().clone()
    if is_main:
        for name, b in engine.module.named_buffers():
            state[name] = b.detach().cpu().clone()
    return state


def end(engine: Any) -> None:
    """Free the engine's hooks and buffers (before the process group goes); a group this module
    made for a one-process run is destroyed here."""
    engine.destroy()
    if _OWN_GROUP and torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()
        _forget_world_group()
    if _OWN_GROUP:
        previous = _OWN_GROUP.pop()
        if previous is None:
            os.environ.pop("LOCAL_RANK", None)
        else:
            os.environ["LOCAL_RANK"] = previous


def _forget_world_group() -> None:
    """DeepSpeed caches its clone of the world group (`deepspeed.utils.groups._WORLD_GROUP`); a
    later engine in this process (a resumed run in a notebook or a test) would use the destroyed
    one. Only the one-process group made here is destroyed by this module."""
    from deepspeed.utils import groups

    if hasattr(groups, "_WORLD_GROUP"):
        groups._WORLD_GROUP = None


def _skip_shared_memory_op() -> None:
    """DeepSpeed's CPU backend compiles a C++ shared-memory all-reduce (`deepspeed_shm_comm`,
    for tensor-parallel inference) with ninja when its comm layer starts: half a minute of a
    compiler on first use, for an op ZeRO training never calls (its collectives go through
    torch.distributed / gloo). Marked incompatible, DeepSpeed falls back to gloo for it."""
    import deepspeed.ops

    probed = vars(deepspeed.ops).get("__compatible_ops__")
    if probed is not None:  # DeepSpeed keeps this one dict and reads it when its comm layer starts
        probed["deepspeed_shm_comm"] = False
    else:  # not probed yet: the probe compiles test programs for every op (a libaio link error
        # on stderr without libaio); ZeRO training with our optimizer builds none of them
        deepspeed.ops.__compatible_ops__ = {"deepspeed_shm_comm": False}


_OWN_GROUP: list[str | None] = []  # when this module made a one-process group: the LOCAL_RANK before


def _ensure_process_group(device: torch.device) -> None:
    """DeepSpeed runs over torch.distributed; a one-process run (no launcher) gets a group of one
    over an in-memory store, and the LOCAL_RANK that DeepSpeed asserts and reads while it runs
    (launchers set it); `end` takes both away again, or a process started from this one (a
    test's, a tool's) would take itself for a launched one."""
    if torch.distributed.is_initialized():
        return
    backend = "nccl" if device.type == "cuda" else "gloo"
    store = torch.distributed.HashStore()
    torch.distributed.init_process_group(backend, store=store, rank=0, world_size=1)
    _OWN_GROUP.append(os.environ.get("LOCAL_RANK"))
    os.environ["LOCAL_RANK"] = "0"
