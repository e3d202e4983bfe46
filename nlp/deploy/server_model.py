"""The model a server runs: a task pipeline loaded from a run, model or export directory.

    served = load_pipeline_for_serving("runs/sentiment-reviews")   # RUN/model, with its max_length
    served.task, served.labels, served.backend, served.precision
    served.pipeline(["服务很好"], top_k=None)

PyTorch models run in the precision `auto` picks, as the trainer's `mixed_precision: auto` does:
bf16 on CPUs with native bf16 dot products (AVX512-BF16 / AMX) and on Ampere+ GPUs, fp16 on
older GPUs, fp32 elsewhere, on weights cast to it once (nlp/models/precision.py says why not
autocast). Export directories run on onnxruntime in the precision they were exported in.
"""

from __future__ import annotations

import importlib.util
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from nlp._common import ConfigError, DataError, NlpError
from nlp.deploy.manifest import MANIFEST_NAME, is_export_dir, read_manifest
from nlp.models import (ONEDNN_SERVING_CACHE_ENTRIES, bucket_gemm_rows, cpu_bf16_flags, limit_onednn_cache,
                        resolve_precision)
from nlp.models.fast_paths import gemm_row_bucket
from nlp.tasks.backend import torch_device
from nlp.tasks.model_dirs import locate_model, trained_max_length
from nlp.tasks.base_pipeline import Pipeline, fitting_pad_multiple
from nlp.tasks.registry import TaskSpec, get_task

__all__ = ["PAD_MULTIPLE", "ServingModel", "backend_advice", "check_servable", "load_pipeline_for_serving",
           "padded_lengths", "serving_pad_multiple", "warm_up_shapes"]

logger = logging.getLogger(__name__)

PAD_MULTIPLE = 16  # a PyTorch server's batch lengths are multiples of this (serving_pad_multiple)


@dataclass
class ServingModel:
    """A loaded pipeline and what /info says about it."""

    pipeline: Pipeline
    task: str                 # canonical task name ("text-classification", ...)
    labels: list[str] | None  # label (tag) names in id order; None for QA
    model: str                # the directory the weights came from
    backend: str              # "torch" or "onnxruntime"
    precision: str            # "fp32", "bf16", "fp16" (the PyTorch model's weights) or the export's ("int8", ...)
    device: str
    max_length: int           # tokens per window
    # False where a row's outputs depend on the other rows of its forward pass: dynamic int8
    # quantizes the activations with one scale per batch, so the server then runs rows one by one
    rows_independent: bool = True


def serving_pad_multiple(max_length: int, max_positions: int) -> int | None:
    """What a PyTorch server pads each batch's length up to a multiple of (None: no rounding).

    PyTorch keeps compiled CPU kernels per sequence length for good (the bf16 attention's
    per-thread brgemm kernels: about 4 MB for each length first seen, measured on ernie-tiny-zh),
    so a server that saw every length from 1 to 128 would hold hundreds of MB more than after its
    warm-up. Rounding lengths up to a multiple of 16 leaves max_length / 16 shapes, which the
    warm-up builds before the server is ready; the extra padding costs at most 15 tokens a row.
    No rounding where it would exceed the position embeddings."""
    return fitting_pad_multiple(PAD_MULTIPLE, max_length, max_positions)


def padded_lengths(pipe: Pipeline) -> list[int]:
    """Every padded batch length the pipeline can produce, when it rounds lengths (else [])."""
    m = pipe.pad_to_multiple_of
    if m is None:
        return []
    return list(range(m, -(-pipe.max_length // m) * m + 1, m))


def warm_up_shapes(pipe: Pipeline, max_batch_tokens: int) -> list[tuple[int, int]]:
    """(rows, tokens per row) of the batches a PyTorch server runs before it is ready: the largest
    batch the budget allows at full length, two rows at every shorter padded length (attention
    kernels are per length), then batches reaching each GEMM row bucket up to the budget not
    reached yet (GEMM kernels are per row count: nlp.models.fast_paths.gemm_row_bucket). After
    them, requests meet compiled kernels only. Without rounding (an export on onnxruntime), the
    largest batch alone."""
    full = max(1, max_batch_tokens // pipe.max_length)
    shapes = [(full, pipe.max_length)]
    lengths = [n for n in padded_lengths(pipe) if n < pipe.max_length]
    if not lengths:
        return shapes
    shapes += [(2, n) for n in lengths]
    reached = {gemm_row_bucket(rows * n) for rows, n in shapes}
    bucket, top = gemm_row_bucket(1), gemm_row_bucket(max(max_batch_tokens, full * pipe.max_length))
    while bucket <= top:
        if bucket not in reached:  # the most rows of the longest padded length that land in it
            for n in sorted(lengths + [pipe.max_length], reverse=True):
                if bucket // n >= 1 and gemm_row_bucket(bucket // n * n) == bucket:
                    shapes.append((bucket // n, n))
                    break
        bucket = gemm_row_bucket(bucket + 1)
    return shapes


def _labels(config: Any, spec: TaskSpec) -> list[str] | None:
    if not spec.has_label_set:
        return None
    return [str(config.id2label[i]) for i in sorted(config.id2label)]


def _resolve(model_path: str | Path, task: str | None) -> tuple[Path, TaskSpec]:
    path = Path(model_path).expanduser()
    if not path.is_dir():
        raise ConfigError(f"model {str(model_path)!r} is not a directory: give a run directory, a model "
                          "directory (config.json + weights) or an `nlp export` directory")
    if (path / MANIFEST_NAME).is_file():  # an export directory, or a damaged one: say which
        try:
            exported = get_task(read_manifest(path)["task"])
        except (DataError, NlpError) as err:
            raise ConfigError(f"{err}; export the model again with `nlp export`") from None
        if task is not None and get_task(task).name != exported.name:
            raise ConfigError(f"{path} is an export of a {exported.name} model; it cannot serve as {task!r}")
        if importlib.util.find_spec("onnxruntime") is None:
            raise ConfigError(f"{path} is an ONNX export, and this install lacks onnxruntime: "
                              "pip install 'nlp-zh[export]', or serve the run or model directory it was exported from.")
        return path, exported
    where = locate_model(path, task)
    return where.model_dir, where.spec


def check_servable(model_path: str | Path, *, task: str | None = None, precision: str = "auto",
                   device: Any = None) -> str:
    """The task `model_path` would be served as; ConfigError (with the fix) when it cannot be:
    what `nlp serve` checks before it listens. An export directory's files are checked against
    its manifest (sha256), and the precision and device against what serves it."""
    path, spec = _resolve(model_path, task)
    if is_export_dir(path):
        _check_export_settings(precision, device)
        from nlp.deploy.manifest import verify_files

        try:
            verify_files(path)
        except (DataError, NlpError) as err:
            raise ConfigError(str(err)) from None
    else:
        resolve_precision(precision, _serving_device(device))
    return spec.name


def backend_advice(model_path: str | Path, *, name: str | None = None, device: Any = None,
                   cpu_flags: list[str] | None = None) -> str | None:
    """Which backend serves more requests on this CPU, when it is not the one `model_path` asks
    for (None otherwise), decided from the CPU's features (docs/serving.md, "Which backend on
    which CPU"; benchmarks/inference.py measures it on a given machine): with AMX tiles,
    PyTorch's bf16 path multiplies on them, which onnxruntime's int8 kernels do not, so the
    PyTorch model serves more; without AMX, the int8 export's VNNI kernels move a quarter of the
    fp32 bytes and serve more than PyTorch in bf16 or fp32.
    `name`: what the user called the model (a hub name), for the command the advice gives (default:
    `model_path`). `cpu_flags`: the CPU's bf16 flags (default: this CPU's, nlp.models.cpu_bf16_flags)."""
    if device not in (None, "cpu") or (device is None and torch.cuda.is_available()):
        return None
    amx = "amx_bf16" in (cpu_bf16_flags() if cpu_flags is None else cpu_flags)
    path = Path(model_path).expanduser()
    if is_export_dir(path):
        precision = str(read_manifest(path).get("precision"))
        if amx and precision == "int8":
            return ("this CPU has AMX (amx_bf16), whose bf16 tiles PyTorch's bf16 path uses and an int8 export "
                    "does not: for throughput serve the run directory this was exported from (`nlp serve RUN "
                    "--precision auto`); the int8 export wins on batch-1 latency and size")
        return None
    if not amx:
        return ("this CPU has no AMX (no amx_bf16 flag), so PyTorch has no bf16 tiles to use and an int8 export's "
                "kernels serve more than the PyTorch model: for throughput export it and serve the export: `nlp "
                f"export {name or path} --out EXPORT --quantize int8 && nlp serve EXPORT`")
    return None


def _serving_device(device: Any) -> torch.device:
    """The device a PyTorch model is served on: cuda when available, else cpu; a device given
    (--device) that this machine lacks is a ConfigError listing the ones it has."""
    if device is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch_device(device, flag="--device")


def _check_export_settings(precision: str, device: Any) -> None:
    if device not in (None, "cpu"):
        raise ConfigError(f"device={device!r}: an export directory runs on onnxruntime's CPU provider; "
                          "leave --device out, or serve the PyTorch run directory on a GPU")
    if precision not in ("auto", "fp32"):
        raise ConfigError(f"precision {precision!r}: an export directory runs in the precision it was exported "
                          "in; leave --precision out (re-export with `nlp export --quantize int8` for int8)")


def load_pipeline_for_serving(model_path: str | Path, *, task: str | None = None, precision: str = "auto",
                              device: Any = None, max_length: int | None = None,
                              name: str | None = None) -> ServingModel:
    """The pipeline to serve from a run directory, a model directory or an export directory.

    `task` defaults to what the model's config (or its run's recipe) says; `max_length` to the
    run's training length, else the pipeline's default; `name`, what the log calls the model, to
    its directory (give the hub name a directory was resolved from: its cache path is internal).
    """
    model_dir, spec = _resolve(model_path, task)
    # every GEMM shape compiles a oneDNN kernel (bf16 included): a server runs its GEMMs
    # in row buckets (below) and keeps all of their kernels, never recompiling
    limit_onednn_cache(ONEDNN_SERVING_CACHE_ENTRIES)
    if is_export_dir(model_dir):
        return _load_export(model_dir, spec, precision, device, max_length, name)
    device = _serving_device(device)
    resolve_precision(precision, device)  # a precision the device cannot run: refused before loading
    max_length = max_length or trained_max_length(model_dir)
    # resolved by the backend, which reads the precision the model declares ("auto" on a CPU
    # without fast bf16: int8 for a model shipped so; nlp.models.precision)
    pipe = spec.pipeline_class(model_dir, device=device, max_length=max_length, precision=precision)
    chosen = pipe.backend.precision
    pipe.pad_to_multiple_of = serving_pad_multiple(pipe.max_length, pipe.config.max_sequence_length)
    bucket_gemm_rows(pipe.model)  # GEMM row counts in ~32 buckets, whatever the mix of batch shapes
    logger.info("loaded %s (%s) on %s, precision %s", name or model_dir, spec.name, device, chosen)
    return ServingModel(pipeline=pipe, task=spec.name, labels=_labels(pipe.model.config, spec),
                        model=str(model_dir), backend="torch", precision=chosen, device=str(device),
                        max_length=pipe.max_length)


def _load_export(path: Path, spec: TaskSpec, precision: str, device: Any, max_length: int | None,
                 name: str | None) -> ServingModel:
    """An `nlp export` directory on onnxruntime (CPU), in the precision it was exported in."""
    from nlp.deploy.backend import OnnxBackend  # `nlp export`'s onnxruntime backend (checked in _resolve)

    _check_export_settings(precision, device)
    backend = OnnxBackend(path)
    pipe = spec.pipeline_class(backend, path, max_length=max_length or trained_max_length(path))  # the run's recipe copy
    dynamic = "dynamic" in str((backend.manifest.get("quantization") or {}).get("method", ""))
    logger.info("loaded %s (%s) on onnxruntime, precision %s%s", name or path, spec.name, backend.precision,
                "; dynamic int8 takes its activation scales per forward pass, so the server runs each "
                "window in a pass of its own (answers independent of batch mates)" if dynamic else "")
    return ServingModel(pipeline=pipe, task=spec.name, labels=_labels(backend.config, spec), model=str(path),
                        backend="onnxruntime", precision=backend.precision, device="cpu",
                        max_length=pipe.max_length, rows_independent=not dynamic)
