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

__all__ = ["QUANTIZE_CHOICES", "KEEP_FP32", "PER_CHANNEL", "quantize_int8", "node_groups", "gemms_to_matmuls"]

QUANTIZE_CHOICES = ("int8",)
# Node groups left in fp32 (see node_groups): "embeddings" (the word / token-type Gathers),
# "classifier" (the MatMul(s) that produce the outputs).
KEEP_FP32: tuple[str, ...] = ("classifier",)
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

    import onnx

    model = onnx.load(str(src))
    gemms = gemms_to_matmuls(model)
    plain = dst.with_name(f"{dst.stem}.matmul.onnx")
    onnx.save(model, str(plain))
    groups = node_groups(plain)
    unknown = [g for g in keep_fp32 if g not in groups]
    if unknown:
        raise ValueError(f"unknown node groups {unknown}; valid: {sorted(groups)}")
    excluded = [name for g in keep_fp32 for name in groups[g]]
    previous = logging.getLogger().level
    # the quantizer logs every node at INFO and advises pre-processing at WARNING (it is not needed here)
    logging.getLogger().setLevel(max(previous, logging.ERROR))
    try:
        quantize_dynamic(str(plain), str(dst), op_types_to_quantize=list(_OPS), per_channel=per_channel,
                         weight_type=QuantType.QInt8, nodes_to_exclude=excluded,
                         extra_options={"MatMulConstBOnly": True})
    finally:
        logging.getLogger().setLevel(previous)
        plain.unlink(missing_ok=True)
    return {"method": "onnxruntime dynamic", "weight_type": "int8", "per_channel": per_channel, "gemms_as_matmul": gemms,
            "ops": list(_OPS), "kept_fp32": {g: groups[g] for g in keep_fp32}}
