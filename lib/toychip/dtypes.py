"""The chip's number formats: which torch dtypes it stores, and how 16-bit floats compute.

Like many real accelerators, the toy chip *stores* float16 and bfloat16 but *computes*
in float32: a kernel widens its 16-bit inputs, runs, and rounds the result back
(round to nearest even), so one op gives the same bits as PyTorch's CPU kernels::

    widen(bits, torch.bfloat16)   # uint16 bit patterns -> float32 values
    narrow(values, torch.bfloat16)  # float32 -> uint16 bit patterns, rounded

NumPy has float16 but no bfloat16, so a bfloat16 buffer holds the upper 16 bits of
each float32 as ``uint16`` (the chip has no uint16 type of its own, so the mapping is
one to one). Chapter 07 (a backend's dtypes) and 08 (porting: mixed precision).
"""
from __future__ import annotations

import numpy as np
import torch

# torch dtype -> NumPy dtype of the chip's buffers.
BUFFER_DTYPE = {
    torch.float32: np.dtype(np.float32),
    torch.float64: np.dtype(np.float64),
    torch.float16: np.dtype(np.float16),
    torch.bfloat16: np.dtype(np.uint16),
    torch.int64: np.dtype(np.int64),
    torch.int32: np.dtype(np.int32),
    torch.int16: np.dtype(np.int16),
    torch.int8: np.dtype(np.int8),
    torch.uint8: np.dtype(np.uint8),
    torch.bool: np.dtype(np.bool_),
}
TORCH_DTYPE = {v: k for k, v in BUFFER_DTYPE.items()}

# Stored in 16 bits, computed in float32.
HALF_DTYPES = frozenset({torch.float16, torch.bfloat16})
_HALF_BUFFERS = frozenset({BUFFER_DTYPE[torch.float16], BUFFER_DTYPE[torch.bfloat16]})
# The dtypes kernels compute in directly: compiled and lazy graphs run on the chip only
# with these (16-bit floats there stay on the CPU).
COMPUTE_DTYPE = {k: v for k, v in BUFFER_DTYPE.items() if k not in HALF_DTYPES}


def is_half_buffer(array) -> bool:
    """Whether a NumPy buffer holds 16-bit floats (float16 values or bfloat16 bits)."""
    return isinstance(array, np.ndarray) and array.dtype in _HALF_BUFFERS


def widen(array: np.ndarray) -> np.ndarray:
    """A 16-bit float buffer as float32 values (bfloat16: bits << 16)."""
    if array.dtype == np.uint16:
        return (array.astype(np.uint32) << 16).view(np.float32)
    return array.astype(np.float32)


def narrow(values, dtype: torch.dtype) -> np.ndarray:
    """Float values rounded into ``dtype``'s buffer format (other dtypes: a plain cast)."""
    values = np.asarray(values)
    if dtype is not torch.bfloat16:
        return values.astype(BUFFER_DTYPE[dtype], copy=False)
    bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    return np.where(np.isnan(values), np.uint16(0x7FC0), rounded).reshape(values.shape)


def values_of(array: np.ndarray) -> np.ndarray:
    """What a buffer's elements *mean*: bfloat16 bits widened, anything else as is."""
    return widen(array) if array.dtype == np.uint16 else array


def store(target: np.ndarray, values, dtype: torch.dtype) -> None:
    """``target[...] = values`` into a buffer of ``dtype``, converting and broadcasting.

    ``values`` is a buffer in the chip's format (bfloat16 as bits) or plain numbers.
    """
    values = np.asarray(values)
    if values.dtype == target.dtype:
        np.copyto(target, values)
    elif dtype is torch.bfloat16:
        np.copyto(target, narrow(np.broadcast_to(values_of(values), target.shape), dtype))
    else:
        np.copyto(target, values_of(values), casting="unsafe")


def host_array(cpu: torch.Tensor) -> np.ndarray:
    """A CPU tensor's data in the chip's buffer format (a copy-free view where possible)."""
    if cpu.dtype is torch.bfloat16:
        return cpu.detach().view(torch.int16).numpy(force=True).view(np.uint16)
    return cpu.numpy(force=True)


def host_tensor(array: np.ndarray) -> torch.Tensor:
    """A CPU tensor sharing ``array`` (a chip-format buffer), with the right torch dtype."""
    if array.dtype == np.uint16:
        return torch.from_numpy(array.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(array)
