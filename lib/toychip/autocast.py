"""Mixed precision on the chip: ``torch.autocast("toychip")`` and its dispatch key.

Autocast is a dispatch key per backend (``AutocastPrivateUse1`` here), switched on by
removing it from the thread-local exclude set. Like CUDA, the chip registers a
*fallthrough* for it (ops autocast leaves alone skip the key at no cost) and real
kernels only for the ops worth running in 16 bits -- the matmul family, whose inputs
are cast to the autocast dtype before the op is called again below the key::

    with torch.autocast("toychip", dtype=torch.bfloat16):
        y = x @ w          # AutocastPrivateUse1: cast x, w -> bf16; then mm on the chip

Chapter 07 traces this path; the chip computes 16-bit floats in float32 (toychip.dtypes).
"""
from __future__ import annotations

import torch
from torch._C import DispatchKey, DispatchKeySet

from .spec import NAME

# Ops autocast runs in the lower precision (CUDA's "lower_precision_fp" list, chip subset).
LOWER_PRECISION_OPS = ("mm", "addmm", "bmm", "convolution")

_AUTOCAST_KEYS = DispatchKeySet(DispatchKey.AutocastPrivateUse1)


def _cast(value, dtype: torch.dtype):
    if isinstance(value, torch.Tensor) and value.is_floating_point() and value.device.type == NAME:
        return value.to(dtype)
    return value


def _lower_precision(op_name: str):
    """The autocast kernel of one op: cast floating chip tensors, call the op below autocast."""
    packet = getattr(torch.ops.aten, op_name)

    def kernel(*args, **kwargs):
        dtype = torch.get_autocast_dtype(NAME)
        args = [_cast(a, dtype) for a in args]
        with torch._C._ExcludeDispatchKeyGuard(_AUTOCAST_KEYS):
            return packet(*args, **kwargs)
    kernel.__name__ = f"autocast_{op_name}"
    return kernel


_LIBS: list[torch.library.Library] = []


def register() -> None:
    """Fallthrough for every op, lower-precision kernels for the matmul family (idempotent)."""
    if _LIBS:
        return
    fallback = torch.library.Library("_", "IMPL")
    fallback.fallback(torch.library.fallthrough_kernel, "AutocastPrivateUse1")
    kernels = torch.library.Library("aten", "IMPL")
    for op_name in LOWER_PRECISION_OPS:
        kernels.impl(op_name, _lower_precision(op_name), "AutocastPrivateUse1")
    _LIBS.extend([fallback, kernels])
