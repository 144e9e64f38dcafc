"""What the chip's Inductor kernels call at run time: chip memory as flat NumPy, one charged launch.

Inductor describes every fused loop nest by *indices into flat buffers* (``x0 + 8*x1``),
the way a Triton kernel sees pointers. So a generated kernel (:mod:`toychip.inductor_codegen`)
receives each tensor as the flat run of its storage from the tensor's offset on, and
reads and writes it with NumPy's fancy indexing::

    @loops.kernel(nbytes=1024, flops=256, aten_ops=2)
    def toychip_fused_add_relu_0(in_ptr0, in_ptr1, out_ptr0, xnumel):
        xindex = np.arange(xnumel)
        ...
        out_ptr0[x0] = tmp3

:func:`kernel` hands the body those views and charges the launch to the ledger, priced by
the bytes and FLOPs the code generator counted -- the same ledger eager kernels charge.
"""
from __future__ import annotations

import contextlib
import functools
from types import SimpleNamespace

import numpy as np
import torch

from . import ledger
from .kernels import KERNELS
from .memory import buffer_of, check_dtype, retyped


def flat(t: torch.Tensor) -> np.ndarray:
    """``t``'s storage from ``t``'s first element to the storage's end, as 1-D NumPy in
    ``t``'s buffer dtype: index ``i`` is the element ``i`` places after ``t.data_ptr()``."""
    np_dtype = check_dtype(t.dtype)
    buf = buffer_of(t.untyped_storage())
    if buf.dtype != np_dtype:  # another dtype's tensor over these bytes
        buf = retyped(buf.view(np.uint8), np_dtype)
    return buf[t.storage_offset():]


# ATen ops each generated kernel computes, by kernel name (a profile counts launches by name).
ATEN_OPS: dict[str, int] = {}


def kernel(nbytes: int, flops: int, aten_ops: int):
    """Decorate a generated kernel: its tensor arguments arrive as :func:`flat` views and
    each call is one launch on the simulated clock; ``aten_ops``: the ATen ops it fuses."""
    def decorate(body):
        ATEN_OPS[body.__name__] = aten_ops

        @functools.wraps(body)
        def launch(*args):
            body(*(flat(a) if isinstance(a, torch.Tensor) else a for a in args))
            if ledger.charging():
                ledger.charge_kernel(body.__name__, nbytes, flops)

        return launch

    return decorate


# Random numbers as Inductor's kernels draw them: a pure function of (seed, offset), where the
# offset is the element's index, so that any kernel that fuses the draw gets the same numbers
# (Triton's ``tl.rand`` is Philox; here it is SplitMix64, enough for dropout masks).
def _mix(seed, offset) -> np.ndarray:
    """64 well-mixed bits per (seed, offset) pair (SplitMix64's finaliser)."""
    with np.errstate(over="ignore"):
        z = np.uint64(seed) * np.uint64(0x9E3779B97F4A7C15) + np.asarray(offset, dtype=np.uint64)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def rand(seed, offset) -> np.ndarray:
    """Uniform float32 in [0, 1), one per offset."""
    return ((_mix(seed, offset) >> np.uint64(40)).astype(np.float32) * np.float32(2.0 ** -24))


def randn(seed, offset) -> np.ndarray:
    """Standard normal float32, one per offset (Box-Muller on two uniform draws)."""
    u1 = 1.0 - rand(seed, offset).astype(np.float64)  # in (0, 1]
    u2 = rand(np.uint64(seed) ^ np.uint64(0x5DEECE66D), offset).astype(np.float64)
    return (np.sqrt(-2.0 * np.log(u1)) * np.cos(2.0 * np.pi * u2)).astype(np.float32)


def randint64(seed, offset, low, high) -> np.ndarray:
    """Integers in [low, high), one per offset."""
    return (low + (_mix(seed, offset) % np.uint64(high - low)).astype(np.int64)).astype(np.int64)


def no_welford_combine(mean: np.ndarray, m2: np.ndarray, weight: np.ndarray):
    """The chip's default: it has no way to combine partial Welford results. Inductor asks
    for one only when it splits a reduction, which needs ``ChipSpec.compute_units > 1``."""
    raise NotImplementedError(
        "toychip: Inductor split a var_mean/LayerNorm reduction in two (ChipSpec.compute_units > 1), and the chip "
        "cannot combine the partial results; give a function with toychip.loops.use_welford_combine(fn)")


welford_combine = no_welford_combine  # what a split reduction's second kernel calls


@contextlib.contextmanager
def use_welford_combine(fn):
    """Inside the block, kernels combine a split reduction's partial Welford results with
    ``fn(mean, m2, weight) -> (mean, m2, weight)``: arrays of the block's shape in, each
    reduced over the last axis (kept, length 1) out."""
    global welford_combine
    previous, welford_combine = welford_combine, fn
    try:
        yield
    finally:
        welford_combine = previous


# The chip's kernel library, for ops NumPy has no function for (``sdk.erf``).
sdk = SimpleNamespace(**{name: k.fn for name, k in KERNELS.items()})
