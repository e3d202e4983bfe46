"""An exported model on onnxruntime, as a pipeline backend (see nlp/tasks/backend.py).

    backend = OnnxBackend("export/")            # checks every file's sha256 against the manifest
    out = backend({"input_ids": ids, "attention_mask": mask, "token_type_ids": types})
    out["logits"]                               # float32 numpy
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from nlp._common import ConfigError, DataError
from nlp._extras import MissingExtraError, install_hint
from nlp.models import ErnieConfig

from .manifest import read_manifest, verify_files

__all__ = ["OnnxBackend", "import_onnxruntime", "DEPLOY_EXTRA", "CPU_DISABLED_OPTIMIZERS"]

DEPLOY_EXTRA = install_hint("export") + "  (onnx, onnxruntime, onnxscript)"
# onnxruntime graph rewrites left off on the CPU: SkipLayerNormFusion merges residual Add +
# LayerNormalization into SkipLayerNormalization, whose CPU kernel is slower than the two nodes
# it replaces (it dominated an int8 encoder's profile where the unfused pair is a small share;
# docs/deploy.md has the measurement, benchmarks/inference.py repeats it)
CPU_DISABLED_OPTIMIZERS = ("SkipLayerNormFusion",)


def import_onnxruntime():
    try:
        import onnxruntime
    except ImportError as err:
        raise MissingExtraError("onnxruntime", "running an exported (ONNX) model") from err
    return onnxruntime


class OnnxBackend:
    """An export directory's model in an onnxruntime session (CPU unless `providers` say otherwise).

    `threads`: onnxruntime's intra-op threads (default: its own, one per physical core).
    `verify`: check every file's sha256 against the manifest first (a damaged copy is refused)."""

    name = "onnxruntime"

    def __init__(self, directory: str | Path, *, providers: Sequence[str] | None = None,
                 threads: int | None = None, verify: bool = True) -> None:
        ort = import_onnxruntime()
        self.directory = Path(directory).expanduser()
        self.manifest = read_manifest(self.directory)
        if verify:
            verify_files(self.directory, self.manifest)
        self.task: str = self.manifest["task"]
        self.precision: str = self.manifest.get("precision", "fp32")
        self.config = ErnieConfig.from_pretrained(self.directory)
        options = ort.SessionOptions()
        if threads is not None:
            options.intra_op_num_threads = int(threads)
        model = self.directory / self.manifest["model"]
        providers = list(providers or ["CPUExecutionProvider"])
        disabled = list(CPU_DISABLED_OPTIMIZERS) if providers == ["CPUExecutionProvider"] else None
        try:
            self.session = ort.InferenceSession(str(model), options, providers=providers,
                                                disabled_optimizers=disabled)
        except Exception as err:  # onnxruntime raises its own classes (Fail, InvalidGraph, ...)
            raise ConfigError(f"onnxruntime {ort.__version__} cannot load {model}: {err}") from None
        self.input_names = [i.name for i in self.session.get_inputs()]
        self.input_rank = len(self.session.get_inputs()[0].shape)  # 2: (batch, sequence)
        self.output_names = [o.name for o in self.session.get_outputs()]
        self.decoding = self._load_decoding()

    def _load_decoding(self) -> dict[str, np.ndarray]:
        """The head's decoding tensors the export carries (its manifest's "decoding" file), which
        the task's pipeline interprets; {} when it has none."""
        name = self.manifest.get("decoding")
        if not name:
            return {}
        from safetensors.numpy import load_file

        try:
            arrays = load_file(str(self.directory / name))
        except Exception as err:  # safetensors raises its own SafetensorError
            raise DataError(f"{self.directory / name}: not a safetensors file ({err}); export the model again") from None
        return {k: v.astype(np.float32) for k, v in arrays.items()}

    def __call__(self, batch: Mapping[str, Any]) -> dict[str, np.ndarray]:
        ids = np.ascontiguousarray(batch["input_ids"], dtype=np.int64)
        feeds = {}
        for name in self.input_names:
            if name in batch:
                feeds[name] = np.ascontiguousarray(batch[name], dtype=np.int64)
            elif name == "attention_mask":
                feeds[name] = np.ones_like(ids)
            elif name == "token_type_ids":
                feeds[name] = np.zeros_like(ids)
            else:
                raise DataError(f"the exported model needs input {name!r}; the batch has {sorted(batch)}")
        outs = self.session.run(self.output_names, feeds)
        return {n: np.asarray(o, dtype=np.float32) for n, o in zip(self.output_names, outs)}

    def __repr__(self) -> str:
        return f"OnnxBackend({str(self.directory)!r}, task={self.task!r}, precision={self.precision})"
