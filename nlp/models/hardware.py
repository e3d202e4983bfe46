"""What the CPU can do fast: bf16 dot-product instructions (asked by training and serving alike).

bf16 is fast only where the CPU has bf16 dot-product instructions, AVX512-BF16 (AMD Zen 4 and
later, Intel Cooper Lake) or AMX (Intel Sapphire Rapids and later). Without them oneDNN emulates
bf16 and its matmuls run at about half the fp32 speed; with them they run at 2-3x.
"""

from __future__ import annotations

import functools
from pathlib import Path

import torch

__all__ = ["cpu_bf16_flags", "cpu_has_fast_bf16"]

_FAST_BF16_FLAGS = ("avx512_bf16", "amx_bf16")  # /proc/cpuinfo names


def cpu_bf16_flags(cpuinfo: str | None = None) -> list[str]:
    """The CPU's bf16 dot-product flags (AVX512-BF16, AMX-BF16) from /proc/cpuinfo's text."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:  # not Linux
            return []
    words = set(cpuinfo.split())
    return [f for f in _FAST_BF16_FLAGS if f in words]


@functools.cache
def cpu_has_fast_bf16() -> bool:
    """True when bf16 matmuls on this CPU run natively (faster than fp32), not emulated."""
    if not torch.backends.mkldnn.is_available():
        return False
    if cpu_bf16_flags():
        return True
    try:  # not Linux: ask torch (private API, hence the guard)
        return bool(torch._C._cpu._is_amx_tile_supported())  # type: ignore[attr-defined]
    except (AttributeError, RuntimeError):
        return False
