"""What a pipeline runs its batches through: a backend.

A backend takes one padded batch of numpy int64 arrays (`input_ids`, `attention_mask`,
`token_type_ids`, each (B, T)) and returns the head's outputs as float32 numpy arrays by name
(`logits`; QA: `start_logits`, `end_logits`). It also carries the model's `config` (labels,
problem type, lengths) and `decoding`: the tensors the head's decoding uses outside the network
(its `decoding_tensors()`, float32 numpy by name; empty for most heads), which the task's
pipeline interprets.

`TorchBackend` (here) runs a PyTorch head model; `nlp.deploy.OnnxBackend` runs an exported
model on onnxruntime. The pipelines of nlp.tasks know only this interface, so they never
import onnxruntime.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

import numpy as np
import torch

from nlp._common import ConfigError
from nlp.models import ErnieConfig, PreTrainedEncoder, prepare_for_inference

__all__ = ["Backend", "TorchBackend", "BackendModule", "available_devices", "torch_device"]


@runtime_checkable
class Backend(Protocol):
    """`backend(batch) -> outputs`; `config`; `decoding` (the head's decoding tensors as float32
    arrays by name, {} for most heads); `name` ("torch", "onnxruntime") and `precision` ("fp32",
    "int8", ...) for reports."""

    config: ErnieConfig
    decoding: dict[str, np.ndarray]
    name: str
    precision: str

    def __call__(self, batch: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]: ...


def available_devices() -> list[str]:
    """The devices a model can run on here, for messages: cpu; cuda and cuda:N where torch sees a
    CUDA device; mps where torch has Apple's Metal."""
    found = ["cpu"]
    if torch.cuda.is_available():
        found += ["cuda", *(f"cuda:{i}" for i in range(torch.cuda.device_count()))]
    if torch.backends.mps.is_available():
        found.append("mps")
    return found


def torch_device(device: Any, *, flag: str = "device") -> torch.device:
    """None -> CPU; an int -> CPU when negative, else that CUDA device; else torch.device(device).
    ConfigError, naming `flag` (`device`, or a command's `--device`), for a device this machine
    lacks: the one check of every device a user gives (pipelines, `nlp serve`)."""
    if device is None:
        return torch.device("cpu")
    try:
        if isinstance(device, int) and not isinstance(device, bool):
            chosen = torch.device("cpu") if device < 0 else torch.device("cuda", device)
        else:
            chosen = torch.device(device)
    except (RuntimeError, TypeError, ValueError):  # "tpu", "cuda:x", ...: torch's "Expected one of cpu, cuda, ..."
        chosen = None
    if chosen is not None and _on_this_machine(chosen):
        return chosen
    option = flag.startswith("--")  # a command's flag, or a keyword argument
    given, cpu = (f"{flag} {device!r}", f"{flag} cpu") if option else (f"{flag}={device!r}", f"{flag}='cpu'")
    fix = f"Give one of them, e.g. {cpu}"
    if chosen is not None and chosen.type == "cuda" and not torch.cuda.is_available():
        fix = ("This torch was built without CUDA: install a CUDA build of torch for a GPU, or give " + cpu
               if torch.version.cuda is None else
               f"Torch sees no CUDA device: check the driver and CUDA_VISIBLE_DEVICES, or give {cpu}")
    raise ConfigError(f"{given} is not a device of this machine; available here: {', '.join(available_devices())}. "
                      f"{fix}")


def _on_this_machine(device: torch.device) -> bool:
    if device.type == "cuda":
        return torch.cuda.is_available() and (device.index or 0) < torch.cuda.device_count()
    if device.type == "mps":
        return torch.backends.mps.is_available()
    return device.type == "cpu"


class TorchBackend:
    """A PyTorch head model (in eval mode, on `device`) as a backend.

    `precision`: None runs the model in the precision its config declares (on a device that runs
    it), else in its own dtype; "fp32", "bf16", "fp16" cast its weights to that dtype, in place,
    as `model.to(device)` moves them; "int8" (CPU) packs int8 copies of the encoder's linear
    layers; "auto" is what is fast on the device (nlp.models.precision). Outputs are float32
    whatever the precision."""

    name = "torch"

    def __init__(self, model: PreTrainedEncoder, device: Any = None, precision: str | None = None) -> None:
        if not isinstance(model, PreTrainedEncoder):
            raise TypeError(f"TorchBackend takes a model of nlp (a PreTrainedEncoder), got {type(model).__name__}")
        self.device = torch_device(device)
        # copied before the cast: decoding outside the network keeps the scores as trained
        self.decoding = {k: t.detach().float().cpu().numpy() for k, t in model.decoding_tensors().items()}
        self.model = model.eval()
        self.precision = prepare_for_inference(model, self.device, precision)
        self.config = model.config

    @torch.inference_mode()
    def __call__(self, batch: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        feeds = {k: torch.as_tensor(np.asarray(v), dtype=torch.long, device=self.device) for k, v in batch.items()}
        out = self.model(**feeds)
        return {f.name: getattr(out, f.name).float().cpu().numpy() for f in dataclasses.fields(out)
                if f.name != "loss" and getattr(out, f.name) is not None}

    def __repr__(self) -> str:
        return f"TorchBackend({type(self.model).__name__}, device={self.device}, precision={self.precision})"


class BackendModule(torch.nn.Module):
    """A backend as a torch module, for loops written for PyTorch head models (evaluation):
    `forward(**batch)` returns the backend's outputs as CPU tensors (`.logits`, or
    `.start_logits` / `.end_logits`; `.loss` None), and `decoding_tensors()` as a head model has."""

    def __init__(self, backend: Backend) -> None:
        super().__init__()
        self.backend = backend
        self.config = backend.config
        # empty, so that `next(module.parameters()).device` (where batches go) says CPU
        self._device_anchor = torch.nn.Parameter(torch.zeros(0), requires_grad=False)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                token_type_ids: torch.Tensor | None = None, **_labels: Any) -> Any:
        import types

        batch = {"input_ids": input_ids.cpu().numpy()}
        if attention_mask is not None:
            batch["attention_mask"] = attention_mask.cpu().numpy()
        if token_type_ids is not None:
            batch["token_type_ids"] = token_type_ids.cpu().numpy()
        # groups of sequences (B, K, T) on a backend that takes sequences (B, T), as a head that
        # encodes each text of a group alone gets them in evaluation: run the B*K rows, regroup
        groups = input_ids.shape[:2] if input_ids.dim() == getattr(self.backend, "input_rank", input_ids.dim()) + 1 else None
        if groups is not None:
            batch = {k: v.reshape(-1, v.shape[-1]) for k, v in batch.items()}
        out = self.backend(batch)
        if groups is not None:
            out = {k: v.reshape(*groups, *v.shape[1:]) for k, v in out.items()}
        return types.SimpleNamespace(loss=None, **{k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in out.items()})

    def decoding_tensors(self) -> dict[str, torch.Tensor]:
        """The backend's decoding tensors, as a head model hands them to its task's decoding."""
        return {k: torch.from_numpy(np.asarray(v, dtype=np.float32)) for k, v in self.backend.decoding.items()}
