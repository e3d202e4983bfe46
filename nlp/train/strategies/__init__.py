"""How the training loop runs over processes: one `Strategy` object per
`train.distributed.strategy`, so that the loop (nlp.train.trainer) and the checkpoints
(nlp.train.checkpoint) never ask which one runs (as litgpt's loop calls `fabric.backward`).

A strategy is one module with one `Strategy` subclass, plus one line in `_BUILT_IN` (or one
`register_strategy` call from outside the package, e.g. a module named in $NLP_STRATEGY_PLUGINS,
which the settings check imports before it looks a name up):

    ddp         nlp.train.strategies.ddp        every process holds the whole model (accelerate's DDP)
    fsdp        nlp.train.strategies.fsdp       torch FSDP2 shards + DCP checkpoints
    deepspeed   nlp.train.strategies.deepspeed  DeepSpeed ZeRO-2/3 (an optional install)

Entries are "module:Class" strings, imported when a run asks for them: naming a strategy in a
recipe imports neither torch.distributed's sharding nor DeepSpeed.
"""

from __future__ import annotations

import importlib
import os
from typing import TYPE_CHECKING, Any

from nlp._common import ConfigError, did_you_mean
from nlp.train.strategies.base import Strategy, set_collective_timeout

if TYPE_CHECKING:
    from nlp.train.settings import TrainSettings

__all__ = ["Strategy", "register_strategy", "strategy_names", "strategy_class", "build_strategy",
           "format_of", "check_launcher", "set_collective_timeout", "PLUGIN_ENV"]

PLUGIN_ENV = "NLP_STRATEGY_PLUGINS"  # module names (comma-separated) that register strategies when imported

_BUILT_IN = {
    "ddp": "nlp.train.strategies.ddp:DataParallel",
    "fsdp": "nlp.train.strategies.fsdp:FullyShardedDataParallel",
    "deepspeed": "nlp.train.strategies.deepspeed:ZeroRedundancy",
}
_REGISTRY: dict[str, str | type[Strategy]] = dict(_BUILT_IN)
_plugins_loaded: set[str] = set()


def register_strategy(name: str, target: str | type[Strategy]) -> None:
    """Make `train.distributed.strategy=NAME` run `target` (a Strategy subclass, or its
    "module:Class" path)."""
    if not isinstance(target, str) and not (isinstance(target, type) and issubclass(target, Strategy)):
        raise TypeError(f"register_strategy({name!r}, ...) needs a Strategy subclass or a 'module:Class' "
                        f"string; got {target!r}")
    _REGISTRY[name] = target


def _load_plugins() -> None:
    for module in filter(None, (m.strip() for m in os.environ.get(PLUGIN_ENV, "").split(","))):
        if module in _plugins_loaded:
            continue
        try:
            importlib.import_module(module)
        except ImportError as err:
            raise ConfigError(f"${PLUGIN_ENV} names {module!r}, which cannot be imported ({err}); fix "
                              f"the module name or PYTHONPATH, or unset {PLUGIN_ENV}") from err
        _plugins_loaded.add(module)


def strategy_names() -> list[str]:
    _load_plugins()
    return list(_REGISTRY)


def strategy_class(name: str) -> type[Strategy]:
    if name not in strategy_names():
        raise ConfigError(f"train.distributed.strategy={name!r} is not one of {', '.join(map(repr, _REGISTRY))}."
                          f"{did_you_mean(name, _REGISTRY)}")
    target = _REGISTRY[name]
    if isinstance(target, str):
        module, _, cls = target.partition(":")
        target = _REGISTRY[name] = getattr(importlib.import_module(module), cls)
    return target


def build_strategy(settings: TrainSettings, accelerator: Any) -> Strategy:
    """The strategy object of a run: checked (before the model is touched), with the collective
    timeout of `train.distributed.timeout_s` set on the run's process group."""
    strategy = strategy_class(settings.distributed.strategy)(settings, accelerator)
    strategy.check()
    if accelerator.num_processes > 1:
        set_collective_timeout(settings.distributed.timeout_s)
    return strategy


def format_of(checkpoint: Any) -> tuple[str | None, str]:
    """The strategy whose format a checkpoint holds, and the file or directory that shows it
    (None, "" when no registered strategy recognises it)."""
    for name in strategy_names():
        cls = strategy_class(name)
        if cls.wrote(checkpoint):
            return name, cls.checkpoint_marker
    return None, ""


def check_launcher(accelerator: Any) -> None:
    """Refuse accelerate's own FSDP / DeepSpeed plugins: the sharded strategies are this package's,
    and the checkpoints do not save those plugins' states."""
    kind = accelerator.distributed_type.name
    if kind in ("FSDP", "DEEPSPEED"):
        raise ConfigError(
            f"accelerate's {kind} plugin is not supported by nlp.train; launch "
            "with plain data-parallel (accelerate launch --multi_gpu) and set "
            "train.distributed.strategy=fsdp (or =deepspeed with train.distributed.zero_stage=2|3) "
            "to shard (see docs/training.md)"
        )
