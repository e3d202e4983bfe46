"""The GEMMs of one ERNIE layer: onnxruntime int8 against PyTorch bf16 and fp32, on this CPU.

    python benchmarks/int8_gemm.py              # ernie-3.0-mini and -base shapes, 32 x 128 tokens
    python benchmarks/int8_gemm.py --quick

Why: the target is an int8 export running at >= 1.0x our best PyTorch path. On a CPU with AMX,
that path is bf16 (oneDNN multiplies on AMX tiles), and an encoder's time is mostly its four
GEMMs per layer. This measures those GEMMs alone, at the shapes of a 32 x 128 batch (M = 4,096
rows): the ceiling an int8 graph cannot pass, whatever its other ops do.

Sides, each in a process of its own, alternating over --rounds rounds, best round per side:
    ort-int8-dynamic   MatMul quantized by onnxruntime's quantize_dynamic (int8 weights), as
                       `nlp export --quantize int8` writes it: DynamicQuantizeMatMul, which also
                       quantizes the fp32 activations on every call
    ort-int8-gemm      MatMulInteger on uint8 x int8 inputs: onnxruntime's int8 GEMM alone, with
                       no quantization pass (its int32 output is what the dynamic op rescales)
    ort-fp32           the fp32 MatMul on onnxruntime
    torch-fp32         x @ w in fp32 (oneDNN / MKL)
    torch-bf16         x @ w in bf16 (oneDNN: AMX tiles where the CPU has them)
Prints ms per GEMM and the rate (T ops/s, 2*M*K*N per GEMM), per shape and summed over the layer,
and the layer's int8 / bf16 time ratio. Never run it next to another busy process.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time

SIDES = ("ort-int8-dynamic", "ort-int8-gemm", "ort-fp32", "torch-fp32", "torch-bf16")
SHAPES = {"ernie-3.0-mini": (384, 1536), "ernie-3.0-base": (768, 3072)}  # hidden, intermediate


def layer_gemms(hidden: int, intermediate: int) -> list[tuple[str, int, int]]:
    """(name, K, N) of one encoder layer's GEMMs."""
    return [("qkv", hidden, 3 * hidden), ("attn-out", hidden, hidden), ("ffn-in", hidden, intermediate),
            ("ffn-out", intermediate, hidden)]


def _timed(fn, repeats: int) -> float:
    for _ in range(3):
        fn()
    start = time.perf_counter()
    for _ in range(repeats):
        fn()
    return (time.perf_counter() - start) / repeats


def _ort_session(model, threads: int):
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    return ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])


def _matmul_model(k: int, n: int, integer: bool):
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    if integer:
        w = rng.integers(-127, 128, (k, n), dtype=np.int8)
        node = helper.make_node("MatMulInteger", ["x", "w"], ["y"])
        x_type, y_type = TensorProto.UINT8, TensorProto.INT32
    else:
        w = rng.standard_normal((k, n), dtype=np.float32)
        node = helper.make_node("MatMul", ["x", "w"], ["y"])
        x_type = y_type = TensorProto.FLOAT
    graph = helper.make_graph([node], "gemm", [helper.make_tensor_value_info("x", x_type, [None, k])],
                              [helper.make_tensor_value_info("y", y_type, [None, n])], [numpy_helper.from_array(w, "w")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def run_side(side: str, m: int, k: int, n: int, threads: int, repeats: int) -> float:
    """Seconds per GEMM of (m, k) x (k, n) on `side`."""
    import numpy as np

    if side.startswith("ort-"):
        import onnx

        model = _matmul_model(k, n, integer=side == "ort-int8-gemm")
        if side == "ort-int8-dynamic":
            from onnxruntime.quantization import QuantType, quantize_dynamic

            with tempfile.TemporaryDirectory() as tmp:
                onnx.save(model, f"{tmp}/fp32.onnx")
                quantize_dynamic(f"{tmp}/fp32.onnx", f"{tmp}/int8.onnx", weight_type=QuantType.QInt8)
                model = onnx.load(f"{tmp}/int8.onnx")
        session = _ort_session(model.SerializeToString(), threads)
        rng = np.random.default_rng(1)
        x = (rng.integers(0, 256, (m, k), dtype=np.uint8) if side == "ort-int8-gemm"
             else rng.standard_normal((m, k), dtype=np.float32))
        return _timed(lambda: session.run(None, {"x": x}), repeats)
    import torch

    torch.set_num_threads(threads)
    dtype = torch.bfloat16 if side == "torch-bf16" else torch.float32
    g = torch.Generator().manual_seed(0)
    x, w = torch.randn(m, k, generator=g).to(dtype), torch.randn(k, n, generator=g).to(dtype)
    with torch.inference_mode():
        return _timed(lambda: x @ w, repeats)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="mini shapes, M = 512, one round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--side", help=argparse.SUPPRESS)  # internal: one side, one shape
    parser.add_argument("--gemm", help=argparse.SUPPRESS)  # internal: "m,k,n"
    args = parser.parse_args()
    if args.side:
        m, k, n = map(int, args.gemm.split(","))
        print(json.dumps({"seconds": run_side(args.side, m, k, n, args.threads, repeats=10 if args.quick else 30)}))
        return
    m = 512 if args.quick else 4096
    rounds = 1 if args.quick else args.rounds
    models = {"ernie-3.0-mini": SHAPES["ernie-3.0-mini"]} if args.quick else SHAPES
    for model, (hidden, intermediate) in models.items():
        gemms = layer_gemms(hidden, intermediate)
        best: dict[tuple[str, str], float] = {}
        for r in range(rounds):
            for side in (SIDES if r % 2 == 0 else SIDES[::-1]):
                for name, k, n in gemms:
                    cmd = [sys.executable, __file__, "--side", side, "--gemm", f"{m},{k},{n}",
                           "--threads", str(args.threads)] + (["--quick"] if args.quick else [])
                    out = subprocess.run(cmd, capture_output=True, text=True, check=True)
                    seconds = json.loads(out.stdout.strip().splitlines()[-1])["seconds"]
                    best[side, name] = min(best.get((side, name), float("inf")), seconds)
        print(f"\n{model}: one layer's GEMMs at M = {m} rows, {args.threads} threads, best of {rounds} round(s)")
        print(f"{'side':18s}" + "".join(f"{f'{name} {k}x{n}':>22s}" for name, k, n in gemms) + f"{'layer':>16s}")
        layer = {}
        for side in SIDES:
            cells, total = [], 0.0
            for name, k, n in gemms:
                s = best[side, name]
                total += s
                cells.append(f"{s * 1e3:8.2f} ms {2 * m * k * n / s / 1e12:5.2f} T/s")
            layer[side] = total
            flops = sum(2 * m * k * n for _, k, n in gemms)
            print(f"{side:18s}" + "".join(f"{c:>22s}" for c in cells) + f"{total * 1e3:8.2f} ms {flops / total / 1e12:4.2f}")
        print(f"int8 (as exported) / torch bf16 speed: {layer['torch-bf16'] / layer['ort-int8-dynamic']:.2f}x; "
              f"int8 GEMM alone / torch bf16: {layer['torch-bf16'] / layer['ort-int8-gemm']:.2f}x; "
              f"torch bf16 / torch fp32: {layer['torch-fp32'] / layer['torch-bf16']:.2f}x")


if __name__ == "__main__":
    main()
