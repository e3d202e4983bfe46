"""int8 dynamic quantization of an exported model (onnxruntime's `quantize_dynamic`).

Weights of the MatMuls (every linear layer) and of the embedding Gathers are stored as int8
(symmetric, QInt8); activations are quantized per batch at run time (DynamicQuantizeLinear +
MatMulInteger, which use VNNI / AVX-512 kernels on CPUs that have them). LayerNorm, softmax,
GELU and the residual adds stay fp32: dynamic quantization has no integer kernels for them.

What stays fp32 was measured (docs/deploy.md, "What int8 keeps in fp32"): the choice below is
`KEEP_FP32` with `PER_CHANNEL`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["QUANTIZE_CHOICES", "KEEP_FP32", "PER_CHANNEL", "quantize_int8", "node_groups"]

QUANTIZE_CHOICES = ("int8",)
# Node groups left in fp32 (see node_groups): "embeddings" (the word / token-type Gathers),
# "classifier" (the MatMul(s) that produce the outputs).
KEEP_FP32: tuple[str, ...] = ("classifier",)
PER_CHANNEL = False


def node_groups(model_path: Path) -> dict[str, list[str]]:
    """Names of the nodes in each group a caller may keep in fp32:
    "embeddings": Gathers that read a 2-D weight (word and token-type embeddings);
    "classifier": the MatMul/Gemm nodes nearest the graph outputs (the task head's linear)."""
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
            if node.op_type in ("MatMul", "Gemm"):
                if node.name not in head:
                    head.append(node.name)
                continue
            todo.extend(node.input)
    return {"embeddings": embeddings, "classifier": head}


def quantize_int8(src: Path, dst: Path, *, keep_fp32: tuple[str, ...] = KEEP_FP32,
                  per_channel: bool = PER_CHANNEL) -> dict[str, Any]:
    """Write the int8 model of `src` to `dst`; returns what was done (for the manifest)."""
    import logging

    from onnxruntime.quantization import QuantType, quantize_dynamic

    groups = node_groups(src)
    unknown = [g for g in keep_fp32 if g not in groups]
    if unknown:
        raise ValueError(f"unknown node groups {unknown}; valid: {sorted(groups)}")
    excluded = [name for g in keep_fp32 for name in groups[g]]
    previous = logging.getLogger().level
    # the quantizer logs every node at INFO and advises pre-processing at WARNING (it is not needed here)
    logging.getLogger().setLevel(max(previous, logging.ERROR))
    try:
        quantize_dynamic(str(src), str(dst), op_types_to_quantize=["MatMul", "Gather"], per_channel=per_channel,
                         weight_type=QuantType.QInt8, nodes_to_exclude=excluded,
                         extra_options={"MatMulConstBOnly": True})
    finally:
        logging.getLogger().setLevel(previous)
    return {"method": "onnxruntime dynamic", "weight_type": "int8", "per_channel": per_channel,
            "ops": ["MatMul", "Gather"], "kept_fp32": {g: groups[g] for g in keep_fp32}}
