"""What a pipeline runs its batches through: a backend.

A backend takes one padded batch of numpy int64 arrays (`input_ids`, `attention_mask`,
`token_type_ids`, each (B, T)) and returns the head's outputs as float32 numpy arrays by name
(`logits`; QA: `start_logits`, `end_logits`). It also carries the model's `config` (labels,
problem type, lengths) and, for an NER head with a CRF, the CRF's transition scores, which
decoding needs outside the network.

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

from nlp.models import PRECISION_DTYPES, ErnieConfig, PreTrainedEncoder, precision_of, resolve_precision

__all__ = ["Backend", "TorchBackend", "BackendModule", "CRF_KEYS", "torch_device"]

# The CRF's parameters as the NER head saves them (nlp/tasks/ner/crf.py).
CRF_KEYS = ("crf.transitions", "crf.start_transitions", "crf.end_transitions")


@runtime_checkable
class Backend(Protocol):
    """`backend(batch) -> outputs`; `config`; `crf` (None, or arrays by CRF_KEYS);
    `name` ("torch", "onnxruntime") and `precision` ("fp32", "int8", ...) for reports."""

    config: ErnieConfig
    crf: dict[str, np.ndarray] | None
    name: str
    precision: str

    def __call__(self, batch: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]: ...


def torch_device(device: Any) -> torch.device:
    """None -> CPU; an int -> CPU when negative, else that CUDA device; else torch.device(device)."""
    if device is None:
        return torch.device("cpu")
    if isinstance(device, int):
        return torch.device("cpu") if device < 0 else torch.device("cuda", device)
    return torch.device(device)


class TorchBackend:
    """A PyTorch head model (in eval mode, on `device`) as a backend.

    `precision`: None keeps the model's own dtype; "fp32", "bf16", "fp16" or "auto" (what is fast
    on the device: nlp.models.precision) casts its weights to that dtype, in place, as
    `model.to(device)` moves them. Outputs are float32 whatever the precision."""

    name = "torch"

    def __init__(self, model: PreTrainedEncoder, device: Any = None, precision: str | None = None) -> None:
        if not isinstance(model, PreTrainedEncoder):
            raise TypeError(f"TorchBackend takes a model of nlp (a PreTrainedEncoder), got {type(model).__name__}")
        self.device = torch_device(device)
        dtype = None if precision is None else PRECISION_DTYPES[resolve_precision(precision, self.device)]
        crf = getattr(model, "crf", None)  # its scores decode outside the network: kept as trained
        self.crf = None if crf is None else {
            k: getattr(crf, k.split(".", 1)[1]).detach().float().cpu().numpy() for k in CRF_KEYS}
        self.model = model.to(device=self.device, dtype=dtype).eval()
        self.config = model.config
        self.precision = precision_of(next(model.parameters()).dtype)

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
    `.start_logits` / `.end_logits`; `.loss` None) and `decode` decodes NER tags as the head does."""

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

    def decode(self, logits: torch.Tensor, mask: torch.Tensor, *, constrained: bool = True) -> list[list[int]]:
        from nlp.tasks.ner.heads import decode_tags

        crf = self.backend.crf
        crf_t = None if crf is None else tuple(torch.from_numpy(np.asarray(crf[k], dtype=np.float32)) for k in CRF_KEYS)
        return decode_tags(logits, mask, self.config.id2label, crf=crf_t, constrained=constrained)
