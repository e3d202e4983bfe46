"""Compact weight files: 2-D weights stored as int8 rows with one scale per row.

What a shipped model can use when fp16 is still too large for the package (nlp/assets): each
float tensor of two dimensions (the linear layers' weights, the embedding tables) is stored as
``round(w / scale)`` in int8 with ``scale = max|row| / 127`` per row (output channel) in fp32
under ``<name>.int8_scale``; one-dimensional tensors (biases, LayerNorm) stay as they are. That
is half the size of fp16, and `from_pretrained` gives back fp32 weights within half a step of
the int8 grid of each row (the model then runs in fp32, bf16 or an int8 export as any other).

The file's safetensors metadata says ``format: nlp-int8-rowwise``, so transformers refuses it
("does not contain the valid metadata") instead of reading the int8 numbers as weights; a
transformers user loads the model through `from_pretrained` here and `save_pretrained` (fp32).
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

__all__ = ["INT8_FORMAT", "SCALE_SUFFIX", "quantize_rows", "dequantize_rows"]

INT8_FORMAT = "nlp-int8-rowwise"
SCALE_SUFFIX = ".int8_scale"


def quantize_rows(tensors: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The int8 form of a state dict (see the module docstring)."""
    out: dict[str, torch.Tensor] = {}
    for name, t in tensors.items():
        if name.endswith(SCALE_SUFFIX):
            raise ValueError(f"tensor name {name!r} ends with {SCALE_SUFFIX!r}, which marks the scales")
        if t.is_floating_point() and t.dim() == 2:
            w = t.detach().float()
            scale = (w.abs().amax(dim=1) / 127.0).clamp(min=1e-12)  # (rows,)
            out[name] = torch.round(w / scale[:, None]).clamp(-127, 127).to(torch.int8).contiguous()
            out[name + SCALE_SUFFIX] = scale.contiguous()
        else:
            out[name] = t.contiguous()
    return out


def dequantize_rows(tensors: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The fp32 state dict of an int8 one (`quantize_rows`' inverse, up to rounding)."""
    out: dict[str, torch.Tensor] = {}
    for name, t in tensors.items():
        if name.endswith(SCALE_SUFFIX):
            continue
        scale = tensors.get(name + SCALE_SUFFIX)
        if scale is None:
            out[name] = t
            continue
        if t.dtype != torch.int8 or scale.shape != (t.shape[0],):
            raise ValueError(f"{name}: int8 rows of shape {tuple(t.shape)} need a scale per row, found "
                             f"{t.dtype} with scales of shape {tuple(scale.shape)}")
        out[name] = t.float() * scale.float()[:, None]
    return out
