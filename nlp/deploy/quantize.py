"""int8 quantization of an exported model: dynamic (onnxruntime's `quantize_dynamic`) and
static, calibrated (`quantize_static`, `quantize_int8_static` below).

Weights of the MatMuls (every linear layer) and of the embedding Gathers are stored as int8
(symmetric, QInt8); activations are quantized per batch at run time (DynamicQuantizeLinear +
MatMulInteger, which use VNNI / AVX-512 kernels on CPUs that have them). LayerNorm, softmax,
GELU and the residual adds stay fp32: dynamic quantization has no integer kernels for them.

What stays fp32 was measured (docs/deploy.md, "What int8 keeps in fp32"): the choice below is
`KEEP_FP32` with `PER_CHANNEL`.

Static int8 (`--quantize int8-static`) fixes every activation's scale beforehand from a
calibration set (min/max over a few hundred real examples), so no pass over the activations
finds their range at run time, and a row's answer no longer depends on its batch mates. The
graph is written in QDQ form (QuantizeLinear / DequantizeLinear pairs around the float ops),
with the MatMul outputs left in float so that onnxruntime fuses each quantized MatMul, its
bias and the dequantization into one `MatMulIntegerToFloat`; measured against the operator
format (`QLinearMatMul`) and the other choices in docs/compress.md ("Calibrated int8"):
`STATIC_FORMAT`, `STATIC_KEEP_FP32`, `STATIC_PER_CHANNEL`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nlp._common import did_you_mean

__all__ = ["QUANTIZE_CHOICES", "KEEP_FP32", "DYNAMIC_GROUPS", "PER_CHANNEL", "quantize_int8", "node_groups",
           "gemms_to_matmuls",
           "STATIC_FORMATS", "STATIC_FORMAT", "STATIC_KEEP_FP32", "STATIC_PER_CHANNEL", "STATIC_GROUPS",
           "quantize_int8_static", "check_calibration_batches", "keep_fp32_groups"]

# int8: dynamic (activation scales per forward pass); int8-static: calibrated activation scales
QUANTIZE_CHOICES = ("int8", "int8-static")
# Node groups left in fp32 (see node_groups): "embeddings" (the word / token-type Gathers),
# "classifier" (the MatMul(s) that produce the outputs).
KEEP_FP32: tuple[str, ...] = ("classifier",)
DYNAMIC_GROUPS = ("embeddings", "classifier")  # the groups node_groups names
PER_CHANNEL = False
# onnxruntime's Attention (a fused export, nlp.models.export_attention) becomes QAttention: its
# qkv projection an int8 GEMM
_OPS = ("MatMul", "Gather", "Attention")


def gemms_to_matmuls(model: Any) -> int:
    """Rewrite each Gemm with a constant weight (the 2-D linears: pooler, classifier) as MatMul
    (named as the Gemm was) + Add, in place; returns how many. The quantizer would split them
    itself under new names, and `nodes_to_exclude` would then miss them."""
    from onnx import helper, numpy_helper

    graph = model.graph
    weights = {i.name: i for i in graph.initializer}
    transposed: dict[str, str] = {}
    nodes = []
    count = 0
    for node in graph.node:
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        if (node.op_type != "Gemm" or node.input[1] not in weights or attrs.get("transA", 0)
                or attrs.get("alpha", 1.0) != 1.0 or attrs.get("beta", 1.0) != 1.0):
            nodes.append(node)
            continue
        w = node.input[1]
        if attrs.get("transB", 0):
            if w not in transposed:
                transposed[w] = f"{w}_transposed"
                graph.initializer.append(numpy_helper.from_array(numpy_helper.to_array(weights[w]).T.copy(), transposed[w]))
            w = transposed[w]
        has_bias = len(node.input) > 2 and node.input[2]
        product = f"{node.output[0]}_matmul" if has_bias else node.output[0]
        nodes.append(helper.make_node("MatMul", [node.input[0], w], [product], name=node.name))
        if has_bias:
            nodes.append(helper.make_node("Add", [product, node.input[2]], [node.output[0]], name=f"{node.name}_bias"))
        count += 1
    del graph.node[:]
    graph.node.extend(nodes)
    return count


def node_groups(model_path: Path) -> dict[str, list[str]]:
    """Names of the nodes in each group a caller may keep in fp32:
    "embeddings": Gathers that read a 2-D weight (word and token-type embeddings);
    "classifier": the MatMul/Gemm nodes nearest the graph outputs (the task head's linear), none
    for a head without one (an embedding model pools the encoder's output): the walk back from
    an output stops at the encoder's last LayerNormalization, so it never reaches into the
    encoder's own linears through the residual adds."""
    import onnx

    graph = onnx.load(str(model_path), load_external_data=False).graph
    weights = {i.name: len(i.dims) for i in graph.initializer}
    embeddings = [n.name for n in graph.node if n.op_type == "Gather" and weights.get(n.input[0]) == 2]
    producer = {out: n for n in graph.node for out in n.output}
    head: list[str] = []
    for output in graph.output:
        todo, seen = [output.name], set()
        while todo:  # walk back from the output to the first matrix product on each path
            node = producer.get(todo.pop())
            if node is None or node.name in seen:
                continue
            seen.add(node.name)
            if node.op_type == "LayerNormalization":  # the encoder's output: no head linear on this path
                continue
            if node.op_type in ("MatMul", "Gemm"):
                if node.name not in head:
                    head.append(node.name)
                continue
            todo.extend(node.input)
    return {"embeddings": embeddings, "classifier": head}


def _quiet_quantizer():
    """The quantizer logs every node at INFO and advises pre-processing at WARNING (not needed
    here): raise the root logger to ERROR while it runs."""
    import contextlib
    import logging

    @contextlib.contextmanager
    def quiet():
        previous = logging.getLogger().level
        logging.getLogger().setLevel(max(previous, logging.ERROR))
        try:
            yield
        finally:
            logging.getLogger().setLevel(previous)

    return quiet()


def quantize_int8(src: Path, dst: Path, *, keep_fp32: tuple[str, ...] = KEEP_FP32,
                  per_channel: bool = PER_CHANNEL) -> dict[str, Any]:
    """Write the int8 model of `src` to `dst`; returns what was done (for the manifest)."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    import onnx

    keep_fp32 = keep_fp32_groups("int8", keep_fp32)
    model = onnx.load(str(src))
    gemms = gemms_to_matmuls(model)
    plain = dst.with_name(f"{dst.stem}.matmul.onnx")
    onnx.save(model, str(plain))
    groups = node_groups(plain)
    excluded = [name for g in keep_fp32 for name in groups[g]]
    try:
        with _quiet_quantizer():
            quantize_dynamic(str(plain), str(dst), op_types_to_quantize=list(_OPS), per_channel=per_channel,
                             weight_type=QuantType.QInt8, nodes_to_exclude=excluded,
                             extra_options={"MatMulConstBOnly": True})
    finally:
        plain.unlink(missing_ok=True)
    return {"method": "onnxruntime dynamic", "weight_type": "int8", "per_channel": per_channel, "gemms_as_matmul": gemms,
            "ops": list(_OPS), "kept_fp32": {g: groups[g] for g in keep_fp32}}


# ---------------------------------------------------------------------------- static (calibrated)

# QDQ: Quantize/DequantizeLinear pairs that onnxruntime fuses into MatMulIntegerToFloat;
# QOperator: QLinearMatMul with uint8 outputs, requantized and dequantized around every float op
STATIC_FORMATS = ("qdq", "qoperator")
# with float MatMul outputs: 286 texts/s on ernie-tiny-zh-sentiment, against 175-209 for the
# variants (QDQ or QOperator) that requantize every MatMul output (docs/compress.md)
STATIC_FORMAT = "qdq"
# Groups kept in float (node_groups, plus "layernorm" and "softmax", whose inputs static QDQ
# could quantize too): the classifier, as in dynamic int8, and the float-only ops (docs/compress.md)
STATIC_KEEP_FP32: tuple[str, ...] = ("classifier", "layernorm", "softmax")
STATIC_PER_CHANNEL = False  # per-channel weight scales: no accuracy gain measured, slightly slower
STATIC_GROUPS = ("embeddings", "classifier", "layernorm", "softmax")
_STATIC_OPS = {"MatMul": None, "Gather": "embeddings", "LayerNormalization": "layernorm", "Softmax": "softmax"}


def keep_fp32_groups(quantize: str | None, keep_fp32: Any) -> tuple[str, ...] | None:
    """`keep_fp32` (node groups to leave in float) as a tuple of groups `quantize` knows, or
    ValueError saying what is valid. None stands for the quantizer's measured default (KEEP_FP32,
    STATIC_KEEP_FP32), and stays None without a quantizer."""
    if keep_fp32 is None:
        return {"int8": KEEP_FP32, "int8-static": STATIC_KEEP_FP32}.get(quantize)
    if quantize not in QUANTIZE_CHOICES:
        raise ValueError("--keep-fp32 names what int8 leaves in float; it needs --quantize int8 or int8-static")
    if isinstance(keep_fp32, str) or not hasattr(keep_fp32, "__iter__"):
        raise ValueError(f"keep_fp32 {keep_fp32!r}: give a list of node groups, e.g. [{keep_fp32!r}]")
    valid = STATIC_GROUPS if quantize == "int8-static" else DYNAMIC_GROUPS
    groups = tuple(dict.fromkeys(keep_fp32))
    unknown = [str(g) for g in groups if g not in valid]
    if unknown:
        raise ValueError(f"--keep-fp32 {', '.join(unknown)}: not a node group of --quantize {quantize}; valid: "
                         f"{', '.join(valid)} (or none).{did_you_mean(unknown[0], valid)}")
    return groups


def check_calibration_batches(batches: Any, inputs: dict[str, tuple[str, ...]], vocab_size: int) -> list[dict]:
    """The calibration batches as lists of int64 arrays with the model's inputs, or ValueError
    saying which batch and input is wrong. `inputs`: each input's axis names (its rank)."""
    import numpy as np

    if batches is None or isinstance(batches, (str, bytes, dict)) or not hasattr(batches, "__iter__"):
        raise ValueError(f"calibration data must be a list of batches (dicts of arrays by input name: "
                         f"{', '.join(inputs)}), got {type(batches).__name__}")
    out = []
    for i, batch in enumerate(batches):
        if not hasattr(batch, "keys"):
            raise ValueError(f"calibration batch {i}: a dict of arrays by input name ({', '.join(inputs)}) "
                             f"expected, got {type(batch).__name__}")
        missing = [n for n in inputs if n not in batch]
        if missing:
            raise ValueError(f"calibration batch {i} has no {', '.join(missing)} (it has "
                             f"{', '.join(map(str, batch)) or 'nothing'}); each batch needs {', '.join(inputs)}")
        arrays = {}
        for name, axes in inputs.items():
            a = np.asarray(batch[name])
            if a.dtype.kind not in "iub" or a.ndim != len(axes) or a.size == 0:
                raise ValueError(f"calibration batch {i}, input {name!r}: a non-empty integer array of "
                                 f"{len(axes)} axes ({', '.join(axes)}) expected, got dtype {a.dtype}, shape "
                                 f"{a.shape}")
            arrays[name] = a.astype(np.int64)
        shapes = {a.shape for a in arrays.values()}
        if len(shapes) > 1:
            raise ValueError(f"calibration batch {i}: the inputs differ in shape ({sorted(shapes)})")
        ids = arrays[next(iter(inputs))]
        if ids.min() < 0 or ids.max() >= vocab_size:
            raise ValueError(f"calibration batch {i}: token ids from {ids.min()} to {ids.max()}, but the model's "
                             f"vocabulary has {vocab_size}; tokenize the calibration texts with the model's tokenizer")
        out.append(arrays)
    if not out:
        raise ValueError("calibration data is empty: give at least one batch (a few hundred examples is typical)")
    return out


def static_node_groups(model_path: Path) -> dict[str, list[str]]:
    """node_groups plus "layernorm" and "softmax": the nodes of those op types."""
    import onnx

    graph = onnx.load(str(model_path), load_external_data=False).graph
    groups = node_groups(model_path)
    groups["layernorm"] = [n.name for n in graph.node if n.op_type == "LayerNormalization"]
    groups["softmax"] = [n.name for n in graph.node if n.op_type == "Softmax"]
    return groups


def quantize_int8_static(src: Path, dst: Path, batches: list[dict], *, keep_fp32: tuple[str, ...] = STATIC_KEEP_FP32,
                         per_channel: bool = STATIC_PER_CHANNEL, quant_format: str = STATIC_FORMAT) -> dict[str, Any]:
    """Write the statically quantized int8 model of `src` to `dst`, its activation ranges taken
    from `batches` (checked by check_calibration_batches); returns what was done (for the
    manifest). uint8 activations, int8 weights, MinMax calibration; a fused Attention node
    (attention="fused") has no static int8 kernel and stays float."""
    import onnx
    from onnxruntime.quantization import (CalibrationDataReader, CalibrationMethod, QuantFormat, QuantType,
                                          quantize_static)

    if quant_format not in STATIC_FORMATS:
        raise ValueError(f"quant_format {quant_format!r}: choose one of {', '.join(STATIC_FORMATS)}")
    keep_fp32 = keep_fp32_groups("int8-static", keep_fp32)

    class _Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self._it = iter(batches)

        def get_next(self):
            return next(self._it, None)

    model = onnx.load(str(src))
    gemms = gemms_to_matmuls(model)
    plain = dst.with_name(f"{dst.stem}.matmul.onnx")
    onnx.save(model, str(plain))
    try:
        groups = static_node_groups(plain)
        excluded = [name for g in keep_fp32 for name in groups[g]]
        ops = [op for op, group in _STATIC_OPS.items() if group not in keep_fp32]
        # a MatMul's output stays float: DQ -> MatMul -> Add fuses into MatMulIntegerToFloat
        # (one pass); a quantized output would be requantized and dequantized again
        extra = {"MatMulConstBOnly": True, "OpTypesToExcludeOutputQuantization": ["MatMul", "Gather"]}
        with _quiet_quantizer():
            quantize_static(str(plain), str(dst), _Reader(), op_types_to_quantize=ops,
                            quant_format=QuantFormat.QDQ if quant_format == "qdq" else QuantFormat.QOperator,
                            per_channel=per_channel, activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8,
                            nodes_to_exclude=excluded, calibrate_method=CalibrationMethod.MinMax,
                            extra_options=extra)
    finally:
        plain.unlink(missing_ok=True)
    examples = sum(int(b[next(iter(b))].shape[0]) for b in batches)
    return {"method": "onnxruntime static", "format": quant_format, "activation_type": "uint8",
            "weight_type": "int8", "per_channel": per_channel, "calibrate_method": "minmax",
            "calibration_rows": examples, "calibration_batches": len(batches), "gemms_as_matmul": gemms,
            "ops": ops, "kept_fp32": {g: groups[g] for g in keep_fp32}}
