"""Int8 inference for the encoder's linear layers on the CPU (precision "int8").

    quantize_linears(model)                 # after the model is on the CPU, in fp32, in eval mode
    y = int8_linear(x, layer.weight)        # None where the int8 path does not apply

Each linear layer inside the encoder's transformer layers (attention projections and
feed-forward) gets an int8 copy of its weight, one scale per output row (symmetric), packed once
for fbgemm; the activations are quantized at each call (dynamic) and the GEMM runs in int8 with
int32 sums (`torch.ops.quantized.linear_dynamic`), about 1.6x the fp32 GEMM at the widths of the
shipped models (256-512). Embeddings, LayerNorm, softmax, attention and the task heads stay fp32.

Every token on its own scale. fbgemm's dynamic GEMM reads one activation range per call (the
input's min and max), so a text's answer would depend on its batch mates: on MSRA's NER test
split 90 of 4,631 texts were tagged differently alone than in batches of 32. Here each row is
divided by its largest magnitude before the GEMM and its output row multiplied by it after, and
one extra row holding +1 and -1 pins the call's range to [-1, 1]: each token is quantized on its
own scale whatever else is in the batch (no text of that split changed its entities between batch
sizes 1 and 32), and with finer steps than one range for all. The fp32 parts still round a little
differently at another padded length, which can move an int8 step: scores agree to ~1e-3. The
range is taken at 7 bits (`reduce_range`), as PyTorch's dynamic quantization does on x86: fbgemm
sums u8 x s8 products in pairs into int16, which 8-bit activations could saturate on CPUs without
VNNI.

Answers move by rounding: on MSRA's NER test split the shipped NER model scored entity F1
0.8694 in int8 against 0.8678 in fp32. Where this path applies is decided per call: CPU, fp32
input, no autograd, not while `torch.export` traces (ONNX export quantizes in its own way, `nlp
export --quantize int8`), and the weight unchanged since it was packed (its `_version`): a weight
trained after packing runs in fp32 again, never on stale int8 values.

The packed weight hangs on the weight tensor itself (attribute `INT8_ATTRIBUTE`), so slices of it
(the query rows a pooled model's last layer takes) are plain tensors and run in fp32.
"""

from __future__ import annotations

import warnings

import torch
from torch import nn

__all__ = ["INT8_ATTRIBUTE", "int8_available", "int8_linear", "quantize_linears"]

INT8_ATTRIBUTE = "_nlp_int8"
_PIN = torch.tensor([1.0, -1.0])


def int8_available() -> bool:
    """True when this torch has fbgemm's dynamic int8 linear (x86 builds do)."""
    return "fbgemm" in torch.backends.quantized.supported_engines and hasattr(torch.ops.quantized, "linear_dynamic")


def _encoder_linears(model: nn.Module) -> list[nn.Linear]:
    """The linear layers of the transformer layers: modules with a fast-path kernel set (`ops`)
    hold them; the task heads and the pooler are left in fp32 (a few thousand multiply-adds)."""
    found: list[nn.Linear] = []
    for module in model.modules():
        if getattr(module, "ops", None) is not None and hasattr(module, "ffn_in"):
            found += [m for m in module.modules() if isinstance(m, nn.Linear)]
    return found


def quantize_linears(model: nn.Module) -> int:
    """Pack an int8 copy of every encoder linear layer's weight (see the module docstring);
    returns how many. The fp32 weights stay: training, export and a GPU still use them."""
    if not int8_available():
        raise RuntimeError("this torch build has no fbgemm int8 kernels (x86 builds have them); "
                           "use precision fp32")
    layers = _encoder_linears(model)
    for layer in layers:
        weight = layer.weight.detach()
        if weight.device.type != "cpu" or weight.dtype != torch.float32:
            raise ValueError(f"int8 packs fp32 CPU weights; this one is {weight.dtype} on {weight.device}")
        scales = (weight.abs().amax(dim=1) / 127.0).clamp_min(1e-12).double()
        with warnings.catch_warnings():  # quantized tensors are deprecated in favour of torchao, which
            warnings.simplefilter("ignore")  # is not a dependency; fbgemm's packed GEMM is what is wanted
            q = torch.quantize_per_channel(weight, scales, torch.zeros(len(scales), dtype=torch.long), 0, torch.qint8)
        packed = torch.ops.quantized.linear_prepack(q, None)  # the bias is added after the row scales
        # the layer's own bias (not a copy): int8 never runs on a stale one
        setattr(layer.weight, INT8_ATTRIBUTE, (packed, layer.bias, layer.weight._version))
    return len(layers)


def int8_linear(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor | None:
    """`x @ weight.T + bias` through the weight's packed int8 copy (its bias included), each row
    of `x` quantized on its own scale; None where the int8 path does not apply (module docstring)."""
    entry = getattr(weight, INT8_ATTRIBUTE, None)
    if entry is None:
        return None
    packed, bias, version = entry
    if (weight._version != version or x.device.type != "cpu" or x.dtype != torch.float32
            or (torch.is_grad_enabled() and (x.requires_grad or weight.requires_grad))
            or torch.compiler.is_exporting()):
        return None
    flat = x.reshape(-1, x.shape[-1])
    rows = flat.shape[0]
    scale = flat.abs().amax(dim=1, keepdim=True).clamp_min_(1e-30)  # (rows, 1)
    pinned = flat.new_empty(rows + 1, flat.shape[1])
    torch.div(flat, scale, out=pinned[:rows])  # every row within [-1, 1], its largest magnitude 1
    pinned[rows].zero_()
    pinned[rows, :2] = _PIN  # the call's range: exactly [-1, 1]
    y = torch.ops.quantized.linear_dynamic(pinned, packed, True)[:rows]
    out = y.mul_(scale) if bias is None else torch.addcmul(bias.detach(), y, scale)
    return out.view(*x.shape[:-1], out.shape[-1])
