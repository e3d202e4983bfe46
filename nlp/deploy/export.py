"""`nlp export`: a run's (or a model directory's) head model to ONNX, optionally int8.

    result = export_model("runs/ner", "export/ner")                       # fp32
    result = export_model("runs/ner", "export/ner-int8", quantize="int8")  # int8 weights
    result = export_model("runs/ner", "export/ner-s8", quantize="int8-static",
                          calibration=batches)                                # calibrated int8

`calibration` (int8-static only): the batches whose activation ranges fix the scales, as a list of
dicts of int64 arrays by input name, or an object with `.batches` (that list), `.source` (a
description for the manifest) and optionally `.score(backend) -> dict`, called on the quantized
model before the export is written (nlp.train.calibration builds one from a run's dev split and
scores the examples it did not calibrate on; the manifest keeps the figures).

The graph comes from `torch.onnx.export(..., dynamo=True)` (torch.export + onnxscript) of a
small wrapper that returns the task's outputs as plain tensors, with dynamic batch and sequence
axes. Under torch.export the model traces as plain ATen ops (nlp/models/ernie.py: no oneDNN
linears, the attention mask always applied, no value checks), so nothing needs switching off.
By default (`attention="fused"`) each layer's self-attention is written as one onnxruntime
`com.microsoft.Attention` node (nlp.models.export_attention), which int8 turns into
`QAttention`; such a graph runs on onnxruntime only. `attention="standard"` keeps to standard
ONNX ops for other runtimes.

The export directory holds:
    model.onnx          the graph with its weights inside (protobuf's 2 GiB limit is far above
                        every ERNIE 3.0 model up to xbase); a larger model keeps its weights
                        beside it in model.onnx.data, listed in the manifest
    config.json         the model's config, with the label names (id2label)
    tokenizer files     tokenizer.json, vocab.txt, tokenizer_config.json, special_tokens_map.json
    decoding.safetensors  the head's `decoding_tensors()`, when it has any: what its task's decoding
                        uses outside the graph (learnt tag-transition scores)
    the task's files    its spec's `model_files` the model directory holds (lexicon.tsv: a lexical
                        model's word lexicon, which its pipelines decode with)
    recipe.yaml         when exported from a run: the run's recipe (`nlp evaluate` reads its data)
    manifest.json       task, inputs/outputs with shapes and dtypes, opset, precision, source,
                        the export check's figures, and the sha256 of every other file

Everything is written to a temporary directory beside the target and renamed into place at the
end, after the check passed: a failed export leaves nothing behind.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from nlp._common import (ConfigError, DataError, NlpError, did_you_mean, output_path_error, publish_directory,
                         remove_abandoned_temporaries, temporary_sibling)
from nlp._extras import MissingExtraError, require
from nlp._signals import signals_held
from nlp.models import PreTrainedEncoder
from nlp.models.export_attention import fused_attention_export
from nlp.tasks.backend import TorchBackend
from nlp.tasks.model_dirs import check_trained_head, locate_model
from nlp.tasks.registry import get_task
from nlp.tasks.spec import TaskSpec
from nlp.tokenizer import load_tokenizer

from .backend import OnnxBackend
from .check import FP32_TOLERANCE, check_batch, check_texts, compare_outputs
from .manifest import DECODING_FILE, FORMAT, FORMAT_VERSION, MANIFEST_NAME, is_export_dir, read_manifest, unlisted_files, write_manifest
from .quantize import (QUANTIZE_CHOICES, check_calibration_batches, keep_fp32_groups, quantize_int8,
                       quantize_int8_static)

__all__ = ["ExportError", "ExportResult", "export_model", "MIN_OPSET", "max_opset",
           "MODEL_FILE", "ATTENTION_CHOICES"]

logger = logging.getLogger(__name__)

MODEL_FILE = "model.onnx"
# fused: one onnxruntime com.microsoft Attention node per layer; standard: ONNX ops only
ATTENTION_CHOICES = ("fused", "standard")
MIN_OPSET = 18  # the dynamo exporter (onnxscript's torchlib) writes opset 18 and newer
_FOLD_LIMIT = 1 << 26  # elements: larger than any weight of the ERNIE family
_EXTERNAL_DATA_BYTES = 1 << 30  # weights above this go beside the graph (protobuf caps a file at 2 GiB)


class ExportError(NlpError, RuntimeError):
    """The export failed or its output did not match PyTorch's."""


def max_opset() -> int:
    """The newest opset the installed onnx package knows."""
    import onnx

    return int(onnx.defs.onnx_opset_version())


@dataclass
class ExportResult:
    out: Path
    task: str
    precision: str
    opset: int
    source: Path
    model_bytes: int
    fp32_bytes: int
    check: dict[str, Any]
    seconds: float
    files: dict[str, dict[str, Any]] = field(default_factory=dict)


class _ExportWrapper(nn.Module):
    """The head model with the task's export inputs as positional arguments (in `inputs` order)
    and its outputs as a tuple of plain tensors (no output dataclass), in the order of the task's
    export outputs."""

    def __init__(self, model: PreTrainedEncoder, inputs: tuple[str, ...], outputs: tuple[str, ...]) -> None:
        super().__init__()
        self.model = model
        self.inputs = inputs
        self.outputs = outputs

    def forward(self, *inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        out = self.model(**dict(zip(self.inputs, inputs)))
        return tuple(getattr(out, name) for name in self.outputs)


def _check_opset(opset: int | None) -> None:
    if opset is None:
        return
    top = max_opset()
    if isinstance(opset, bool) or not isinstance(opset, int) or not MIN_OPSET <= opset <= top:
        raise ConfigError(f"--opset {opset!r}: the installed exporter writes opsets {MIN_OPSET} to {top} "
                          f"(torch.onnx dynamo exporter, onnx {__import__('onnx').__version__}); leave it out for "
                          "the exporter's default")


def _register_attention_schema() -> None:
    """Tell onnx (whose registry the exporter consults) the signature of onnxruntime's
    com.microsoft Attention, the part of it used here: onnx ships no contrib-op schemas."""
    import onnx
    from onnx.defs import OpSchema

    if onnx.defs.has("Attention", "com.microsoft"):
        return
    param = OpSchema.FormalParameter
    optional = OpSchema.FormalParameterOption.Optional
    onnx.defs.register_schema(OpSchema(
        "Attention", "com.microsoft", 1,
        doc="onnxruntime contrib op: multi-head self-attention with a fused qkv projection",
        inputs=[param("input", "T"), param("weights", "T"), param("bias", "T", param_option=optional),
                param("mask_index", "M", param_option=optional)],
        outputs=[param("output", "T")],
        type_constraints=[("T", ["tensor(float)", "tensor(float16)"], ""), ("M", ["tensor(int32)"], "")],
        attributes=[OpSchema.Attribute("num_heads", OpSchema.AttrType.INT, "number of heads", required=True)],
    ))


def _attention_translation() -> dict[Any, Any]:
    """How `torch.ops.nlp.self_attention` (nlp.models.export_attention) is written in ONNX: one
    onnxruntime `com.microsoft.Attention` node. Its weight input is the (H, 3H) transpose of the
    fused qkv weight (columns q | k | v), which the constant folding below turns into an
    initializer, as the int8 quantizer's QAttention needs; its mask is the (B, T) int32 key
    padding mask ("raw attention mask", 1 = attend)."""
    import onnx
    import onnxscript
    from onnxscript import opset18 as op

    _register_attention_schema()
    ms = onnxscript.values.Opset("com.microsoft", 1)

    def self_attention(x, qkv_weight, qkv_bias, key_padding, num_heads: int):
        weight = op.Transpose(qkv_weight, perm=[1, 0])
        mask = op.Cast(key_padding, to=onnx.TensorProto.INT32)
        return ms.Attention(x, weight, qkv_bias, mask, num_heads=num_heads)

    return {torch.ops.nlp.self_attention.default: self_attention}


def _dynamic_shapes(spec: TaskSpec, max_positions: int) -> dict[str, Any]:
    """torch.export's dynamic shapes of the wrapper's inputs: one Dim per axis name of the
    spec's `export_axes()` (shared across inputs); "sequence" is bounded by the positions."""
    axes = spec.export_axes()
    dims = {name: torch.export.Dim(name, max=max_positions) if name == "sequence" else torch.export.Dim(name)
            for names in axes.values() for name in names}
    return {"inputs": tuple({i: dims[a] for i, a in enumerate(axes[name])} for name in spec.export_inputs)}


def _write_onnx(model: PreTrainedEncoder, spec: TaskSpec, batch: dict[str, np.ndarray], path: Path,
                opset: int | None, attention: str) -> int:
    """Export `model` to `path`; returns the opset written."""
    import onnx

    task = spec.name
    inputs, outputs = spec.export_inputs, spec.model_outputs(model.config)
    wrapper = _ExportWrapper(model, tuple(inputs), tuple(outputs)).eval()
    example = tuple(torch.from_numpy(batch[name][:2]) for name in inputs)  # batch 2: not specialised to 1
    dynamic = _dynamic_shapes(spec, model.config.max_sequence_length)
    param_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    try:
        fused = attention == "fused"
        with torch.no_grad(), _quiet_exporter(), (fused_attention_export() if fused else contextlib.nullcontext()):
            program = torch.onnx.export(wrapper, example, dynamo=True, input_names=list(inputs),
                                        output_names=list(outputs), dynamic_shapes=dynamic,
                                        opset_version=opset, report=False, verbose=False,
                                        custom_translation_table=_attention_translation() if fused else None)
            # Fold what the default limits (8,192 input elements) leave unfolded: slices of a
            # weight (the pooled-only last layer reads q and k/v rows of its fused qkv) stay
            # run-time Slices, whose MatMuls the int8 quantizer cannot take (their weight is
            # not a constant) and which cost a copy per call.
            import onnxscript

            onnxscript.optimizer.optimize(program.model, input_size_limit=_FOLD_LIMIT, output_size_limit=_FOLD_LIMIT)
        program.save(str(path), external_data=param_bytes > _EXTERNAL_DATA_BYTES)
    except ImportError as err:
        raise MissingExtraError(err.name or "onnxscript", "ONNX export (`nlp export`)", extra="export") from err
    except Exception as err:  # the exporter's own error classes carry the details
        raise ExportError(f"torch.onnx.export failed for the {task} model: {type(err).__name__}: "
                          f"{str(err).strip().splitlines()[0] if str(err).strip() else ''}") from err
    graph = onnx.load(str(path), load_external_data=False)
    return next(o.version for o in graph.opset_import if o.domain in ("", "ai.onnx"))


@contextlib.contextmanager
def _quiet_exporter():
    """The exporter prints progress to stdout, logs every optimisation pass at INFO and warns
    about optional packages (torchvision); keep that out of the user's terminal (DEBUG log)."""
    import warnings

    names = ("torch.onnx", "torch.export", "torch._export", "onnxscript", "onnx_ir")
    levels = {n: logging.getLogger(n).level for n in names}
    try:
        for n in names:
            logging.getLogger(n).setLevel(logging.ERROR)
        with warnings.catch_warnings(), contextlib.redirect_stdout(_LogWriter()):
            warnings.simplefilter("ignore")
            yield
    finally:
        for n, level in levels.items():
            logging.getLogger(n).setLevel(level)


class _LogWriter:
    """Where the exporter's prints go: the DEBUG log."""

    def write(self, text: str) -> int:
        if text.strip():
            logger.debug(text.rstrip())
        return len(text)

    def flush(self) -> None:
        pass


def _shapes(spec: TaskSpec, config: Any) -> tuple[list[dict], list[dict]]:
    outputs, num_labels = spec.model_outputs(config), config.num_labels
    ins = [{"name": n, "dtype": "int64", "shape": list(axes)} for n, axes in spec.export_axes().items()]
    outs = [{"name": n, "dtype": "float32", "shape": [num_labels if a == "num_labels" else a for a in axes]}
            for n, axes in outputs.items()]
    return ins, outs


def _check_replaceable(out: Path) -> None:
    """ConfigError unless `out` is a directory that export wrote: its manifest, and no file the
    manifest does not list (--force replaces an earlier export, never anyone's other files)."""
    if not out.is_dir():
        raise ConfigError(f"--out {str(out)!r} is a file; give a directory path")
    if not is_export_dir(out):
        names = sorted(p.name for p in out.iterdir())
        shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "") or "nothing"
        raise ConfigError(f"--out {str(out)!r} exists and is not an `nlp export` directory (no valid {MANIFEST_NAME}; "
                          f"it holds {shown}); --force replaces only an earlier export. Choose another --out, or "
                          "move that directory away yourself")
    try:
        extra = unlisted_files(out, read_manifest(out))
    except (DataError, NlpError) as err:
        raise ConfigError(f"--out {str(out)!r}: {err}; --force replaces only an intact earlier export") from None
    if extra:
        raise ConfigError(f"--out {str(out)!r} is an earlier export, but it also holds files the export did not "
                          f"write ({', '.join(extra[:5])}); --force would delete them. Move them out first, "
                          "or choose another --out")


def _replace_dir(tmp: Path, out: Path, force: bool) -> None:
    """Rename `tmp` to `out`; with `force`, an existing `out` (checked again: an export) is
    removed only once `tmp` is in place."""
    if out.exists():
        if not force:
            raise ConfigError(f"--out {str(out)!r} exists; choose another directory or pass --force to replace it")
        _check_replaceable(out)
    publish_directory(tmp, out)


def _make_temp_dir(out: Path) -> Path:
    """The temp directory beside `out` (created with its parents), or ConfigError in one line
    when `out`'s parent cannot be written: checked before any work."""
    try:
        tmp = temporary_sibling(out)  # a served export is shared: the umask's permissions
    except OSError as err:
        raise output_path_error(out, "--out", err) from None
    return tmp


def _static_attention(quantize: str | None, attention: str | None) -> str:
    """The attention form: as given, else "standard" for int8-static (onnxruntime has no static
    int8 kernel for the fused Attention node, whose qkv projection would stay float: measured
    in docs/compress.md), else "fused"."""
    if attention is not None:
        return attention
    return "standard" if quantize == "int8-static" else "fused"


def export_model(source: str | os.PathLike, out: str | os.PathLike, *, quantize: str | None = None,
                 opset: int | None = None, task: str | None = None, force: bool = False,
                 texts: list[str] | None = None, attention: str | None = None,
                 calibration: Any = None, keep_fp32: tuple[str, ...] | list[str] | None = None) -> ExportResult:
    """Export the head model of a run or model directory to `out` (see the module docstring).
    `attention`: "fused" writes each layer's self-attention as one onnxruntime Attention node
    (QAttention in int8); "standard" uses only standard ONNX ops, for other ONNX runtimes;
    None: fused, but standard for int8-static. `calibration`: int8-static's calibration batches
    (see the module docstring). `keep_fp32`: the node groups int8 leaves in float, in place of the
    measured defaults (nlp.deploy.quantize: KEEP_FP32, the classifier, for int8; STATIC_KEEP_FP32,
    the classifier, LayerNorm and softmax, for int8-static); groups: DYNAMIC_GROUPS and
    STATIC_GROUPS there; () quantizes every group.

    Raises ConfigError for bad arguments (before any work), ExportError when the exporter fails
    or the fp32 model's logits differ from PyTorch's by more than 1e-4 on the check texts."""
    started = time.perf_counter()
    for module in ("onnx", "onnxscript", "onnxruntime"):  # the export extra, before any work
        require(module, "ONNX export (`nlp export`)")
    out = Path(out).expanduser()
    if quantize is not None and quantize not in QUANTIZE_CHOICES:
        raise ConfigError(f"--quantize {quantize!r}: choose one of {', '.join(QUANTIZE_CHOICES)} (or leave it out for fp32)"
                          f"{did_you_mean(str(quantize), QUANTIZE_CHOICES)}")
    if (quantize == "int8-static") != (calibration is not None):
        raise ConfigError("--quantize int8-static needs calibration data (a few hundred examples of the task: "
                          "`nlp export RUN --quantize int8-static` takes them from the run's dev split, or give "
                          "--calibration DATA)" if calibration is None else
                          f"calibration data is used by --quantize int8-static only, not {quantize or 'fp32'}; "
                          "leave it out or quantize statically")
    try:
        keep_fp32 = keep_fp32_groups(quantize, keep_fp32)
    except ValueError as err:
        raise ConfigError(str(err)) from None
    attention = _static_attention(quantize, attention)
    _check_opset(opset)
    if attention not in ATTENTION_CHOICES:
        raise ConfigError(f"--attention {attention!r}: choose one of {', '.join(ATTENTION_CHOICES)}")
    if out.exists() and not force:
        raise ConfigError(f"--out {str(out)!r} exists; choose another directory or pass --force to replace it")
    where = locate_model(source, task)
    model_dir, kind, spec = where.model_dir, where.kind, where.spec
    if kind == "export":
        raise ConfigError(f"{str(source)!r} is already an export directory; export the run or model directory "
                          f"it came from")
    resolved, model_resolved = out.resolve(), model_dir.resolve()
    if resolved == model_resolved or resolved in model_resolved.parents:
        raise ConfigError(f"--out {str(out)!r} holds the model being exported ({model_dir}); "
                          "give a directory outside it")
    if model_resolved in resolved.parents:
        raise ConfigError(f"--out {str(out)!r} lies inside the model directory {model_dir}, which loaders read "
                          "whole; give a directory outside it (e.g. beside the run)")
    if out.exists():
        _check_replaceable(out)
    if task is not None:
        try:
            check_trained_head(model_dir, task)
        except ConfigError as err:
            raise ConfigError(f"--task {err}; or leave --task out to export the trained head") from None
    task = spec.name
    remove_abandoned_temporaries(out)  # what an export killed by SIGKILL left
    tmp = None
    try:
        with signals_held():  # a signal between the mkdtemp and `tmp` being set would leak the dir
            tmp = _make_temp_dir(out)  # before any work: an --out that cannot be written fails now
        manifest, check, written_opset, fp32_bytes = _export_into(
            tmp, source, model_dir, kind, task, spec, quantize, opset, attention, texts, calibration, keep_fp32)
        model_bytes = sum(v["bytes"] for k, v in manifest["files"].items() if k.startswith(MODEL_FILE))
        _replace_dir(tmp, out, force)
    except BaseException:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
        raise
    return ExportResult(out=out, task=task, precision=manifest["precision"], opset=written_opset,
                        source=model_dir, model_bytes=model_bytes, fp32_bytes=fp32_bytes, check=check,
                        seconds=time.perf_counter() - started, files=manifest["files"])


def _write_decoding(tmp: Path, decoding: dict[str, Any]) -> str | None:
    """The head's decoding tensors (what its task decodes with outside the graph) as a safetensors
    file in the export; its name for the manifest, None when the head has none."""
    if not decoding:
        return None
    from safetensors.numpy import save_file

    save_file(dict(decoding), str(tmp / DECODING_FILE))
    return DECODING_FILE


def _export_into(tmp: Path, source: str | os.PathLike, model_dir: Path, kind: str, task: str, spec: TaskSpec,
                 quantize: str | None, opset: int | None, attention: str,
                 texts: list[str] | None, calibration: Any = None,
                 keep_fp32: tuple[str, ...] | None = None) -> tuple[dict[str, Any], dict[str, Any], int, int]:
    """Write the export into `tmp`: (manifest, check figures, opset written, fp32 model bytes)."""
    model = spec.head.from_pretrained(model_dir).eval()
    batches = None
    if calibration is not None:  # checked before the (slow) export
        try:
            batches = check_calibration_batches(getattr(calibration, "batches", calibration), spec.export_axes(),
                                                model.config.vocab_size)
        except ValueError as err:
            raise ConfigError(f"{err}") from None
    tokenizer = load_tokenizer(model_dir)
    max_length = min(tokenizer.model_max_length, model.config.max_sequence_length, 256)
    batch = check_batch(spec, tokenizer, max_length, texts or check_texts())
    # the reference is the fp32 network the export writes, whatever precision the model declares
    # for its own inference (an int8 declaration would make it differ by int8's rounding)
    reference = TorchBackend(model, precision="fp32")
    torch_out = reference(batch)
    fp32_path = tmp / (MODEL_FILE if quantize is None else "fp32.onnx")
    written_opset = _write_onnx(model, spec, batch, fp32_path, opset, attention)
    fp32_bytes = sum(p.stat().st_size for p in tmp.iterdir() if p.name.startswith(fp32_path.name))
    model.config.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    spec.copy_model_files(model_dir, tmp)  # the task's own files (a lexical model's word lexicon)
    decoding_file = _write_decoding(tmp, reference.decoding)
    recipe = None
    if kind == "run" and (model_dir.parent / "recipe.yaml").is_file():
        recipe = "recipe.yaml"
        shutil.copyfile(model_dir.parent / "recipe.yaml", tmp / recipe)
    ins, outs = _shapes(spec, model.config)
    manifest: dict[str, Any] = {
        "format": FORMAT, "format_version": FORMAT_VERSION, "task": task, "model": MODEL_FILE,
        "precision": "fp32", "opset": written_opset, "attention": attention, "inputs": ins, "outputs": outs,
        "decoding": decoding_file,
        "quantization": None,
        "source": {"path": str(Path(source).expanduser().resolve()), "kind": kind, "recipe": recipe},
        "versions": _versions(),
    }
    fp32_check = _check(tmp, manifest, fp32_path.name, batch, torch_out)
    if fp32_check.max_abs_diff > FP32_TOLERANCE:
        raise ExportError(f"the exported model's outputs differ from PyTorch's by {fp32_check.max_abs_diff:.2e} "
                          f"(> {FP32_TOLERANCE:g}) on {fp32_check.texts} check texts; nothing was written")
    check = {"fp32": fp32_check.as_dict()}
    if quantize is not None:
        check.update(_quantize_step(tmp, manifest, fp32_path, fp32_bytes, quantize, batches, calibration,
                                    batch, torch_out, keep_fp32))
    manifest["check"] = check
    manifest = write_manifest(tmp, manifest)
    return manifest, check, written_opset, fp32_bytes


def _quantize_step(tmp: Path, manifest: dict[str, Any], fp32_path: Path, fp32_bytes: int, quantize: str,
                   batches: list[dict] | None, calibration: Any, batch: dict[str, np.ndarray],
                   torch_out: dict[str, np.ndarray], keep_fp32: tuple[str, ...] | None = None) -> dict[str, Any]:
    """Quantize the fp32 graph into MODEL_FILE (dynamic int8, or static with `batches`; `keep_fp32`:
    the groups left in float, as keep_fp32_groups resolved them), drop the
    fp32 file, record how in `manifest` (updated in place: it is the export's manifest being
    built) and return the check figures: "int8" against PyTorch on the check batch and, with a
    calibration object that can score, "held_out" (its figures on the examples not calibrated on)."""
    if quantize == "int8-static":
        info = quantize_int8_static(fp32_path, tmp / MODEL_FILE, batches or [], keep_fp32=keep_fp32)
        source = getattr(calibration, "source", None)
        if source:
            info["calibration"] = str(source)
    else:
        info = quantize_int8(fp32_path, tmp / MODEL_FILE, keep_fp32=keep_fp32)
    for p in list(tmp.iterdir()):
        if p.name.startswith(fp32_path.name):
            p.unlink()
    manifest["precision"] = "int8"
    manifest["quantization"] = {**info, "fp32_bytes": fp32_bytes}
    figures = {"int8": _check(tmp, manifest, MODEL_FILE, batch, torch_out).as_dict()}
    score = getattr(calibration, "score", None)
    if callable(score):  # e.g. the metric on the examples not calibrated on
        figures["held_out"] = _score(tmp, manifest, score)
    return figures


def _check(directory: Path, manifest: dict[str, Any], model_file: str, batch: dict[str, np.ndarray],
           expected: dict[str, np.ndarray]):
    """Run the model file in `directory` on the check batch and compare with PyTorch's outputs."""
    write_manifest(directory, {**manifest, "model": model_file})  # what OnnxBackend reads
    try:
        backend = OnnxBackend(directory, verify=False)
        return compare_outputs(expected, backend(batch), batch["attention_mask"])
    finally:
        (directory / MANIFEST_NAME).unlink(missing_ok=True)


def _score(directory: Path, manifest: dict[str, Any], score: Any) -> dict[str, Any]:
    """`score(backend)` on the quantized model in `directory` (the caller's held-out figures)."""
    write_manifest(directory, manifest)
    try:
        return dict(score(OnnxBackend(directory, verify=False)))
    finally:
        (directory / MANIFEST_NAME).unlink(missing_ok=True)


def _versions() -> dict[str, str]:
    import importlib.metadata as md

    out = {"torch": torch.__version__}
    for name in ("nlp-zh", "onnx", "onnxscript", "onnxruntime"):
        with contextlib.suppress(md.PackageNotFoundError):
            out[name] = md.version(name)
    return out


