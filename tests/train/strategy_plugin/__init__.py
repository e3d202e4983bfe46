"""A training strategy defined outside `nlp` (the proof that a strategy is one file plus one
registry line): `one-device`, a single process with no accelerate wrapper, its own clipping and
its own checkpoint format (`one-device/state.pt`). Registered when this module is imported,
which `nlp` does for the modules named in $NLP_STRATEGY_PLUGINS."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import torch

from nlp._common import ConfigError
from nlp.train.strategies import Strategy, register_strategy

CALLS_ENV = "ONE_DEVICE_CALLS"  # a file the strategy appends its calls to, for the test to read


class OneDevice(Strategy):
    name = "one-device"
    checkpoint_marker = "one-device/state.pt"

    def check(self) -> None:
        super().check()
        if self.accelerator.num_processes != 1:
            raise ConfigError(f"strategy=one-device runs on one process, not {self.accelerator.num_processes}")

    def _record(self, what: str) -> None:
        path = os.environ.get(CALLS_ENV)
        if path:
            with open(path, "a", encoding="utf-8") as f:
                f.write(json.dumps(what) + "\n")

    def prepare(self, model: torch.nn.Module, make_optimizer: Any) -> tuple[Any, Any, Any]:
        self._record("prepare")
        self.model = model.to(self.accelerator.device)
        self.optimizer, self.scheduler = make_optimizer(self.model)
        return self.model, self.optimizer, self.scheduler

    def backward(self, loss: torch.Tensor) -> None:
        loss.backward()

    def step(self, max_norm: float | None) -> tuple[bool, float | None]:
        self._record("step")
        norm = None if max_norm is None else float(torch.nn.utils.clip_grad_norm_(self.model.parameters(), max_norm))
        self.optimizer.step()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        return True, norm

    def final_model(self) -> torch.nn.Module:
        return self.model

    def save(self, directory: Path) -> None:
        self._record("save")
        (directory / "one-device").mkdir()
        torch.save({"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict()},
                   directory / self.checkpoint_marker)

    def load(self, checkpoint: Path, *, saved_world_size: int) -> None:
        self._record("load")
        state = torch.load(checkpoint / self.checkpoint_marker, map_location="cpu", weights_only=True)
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])

    def load_model(self, checkpoint: Path) -> None:
        state = torch.load(checkpoint / self.checkpoint_marker, map_location="cpu", weights_only=True)
        self.model.load_state_dict(state["model"])

    def end(self) -> None:
        self._record("end")
        super().end()


register_strategy("one-device", OneDevice)
