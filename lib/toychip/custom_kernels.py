"""Add chip kernels from Python: ``toychip.register_kernel(op, numpy_fn)``, undoable.

What a vendor does for every op it ports (chapter 07's exercise adds ``gelu``): write
the kernel against the SDK -- here a NumPy function on the chip's buffers -- and
register it in the op's ``PrivateUse1`` slot of the dispatch table. The kernel gets the
same eager wrapper as the built-in table (unwrap, run, charge the simulated clock,
count it as native, 16-bit floats computed in float32)::

    def gelu_tanh(a, approximate="none"):
        return 0.5 * a * (1 + np.tanh(0.7978845608 * (a + 0.044715 * a**3)))

    with toychip.kernel_scope():
        toychip.register_kernel("aten::gelu", gelu_tanh)
        F.gelu(x, approximate="tanh")      # runs gelu_tanh on the chip
    # leaving the scope unregisters it: gelu falls back to the CPU again

A registration belongs to a ``torch.library.Library`` owned by the innermost open
:func:`kernel_scope` (or, outside every scope, kept for the life of the process):
destroying a library is how the dispatcher forgets its kernels. Eager mode only: lazy
and compiled graphs keep using the built-in table.
"""
from __future__ import annotations

import contextlib
from typing import Callable

import numpy as np
import torch

from .kernels import Kernel, numel_flops
from .op_table import OpEntry, eager_kernel

# Open scopes, innermost last: each maps an op namespace to the Library holding its kernels.
_scopes: list[dict[str, torch.library.Library]] = []
_permanent: dict[str, torch.library.Library] = {}


def resolve_op(op) -> torch._ops.OpOverload:
    """``aten.gelu.default``, ``"aten::gelu"``, ``"gelu.default"`` or ``"gelu"`` -> the overload."""
    if isinstance(op, torch._ops.OpOverload):
        return op
    if isinstance(op, torch._ops.OpOverloadPacket):
        return op.default
    namespace, _, rest = str(op).rpartition("::")
    name, _, overload = rest.partition(".")
    return getattr(getattr(getattr(torch.ops, namespace or "aten"), name), overload or "default")


def chip_kernel(op, fn: Callable, *, kind: str = "pointwise", flops: Callable | None = None) -> Callable:
    """``fn`` (NumPy arrays in, NumPy array(s) out) as a kernel on toychip *tensors* for ``op``.

    The result is what the dispatcher can call: it unwraps chip tensors, runs ``fn``,
    charges the simulated clock (``kind``; ``flops(inputs, outputs)``, default one per
    element) and counts ``op`` as native. Give it to ``torch.library`` yourself
    (``my_op.register_kernel("toychip")(chip_kernel(...))``) or use :func:`register_kernel`.
    For an in-place overload (``gelu_``) ``fn`` returns the new values, which are
    written into the first argument.
    """
    overload = resolve_op(op)
    name = str(overload).removeprefix("aten.")
    inplace = overload._overloadpacket.__name__.endswith("_")
    body = _writing_into_out(fn) if inplace else fn
    kernel = Kernel(name, body, kind, flops or numel_flops, (fn.__doc__ or "").strip())
    return eager_kernel(OpEntry(overload, kernel, inplace=inplace))


def register_kernel(op, fn: Callable, *, kind: str = "pointwise",
                    flops: Callable | None = None) -> torch._ops.OpOverload:
    """Run ``fn`` (see :func:`chip_kernel`) for ``op`` on toychip tensors, in the current scope.

    Registering over an existing kernel replaces it until the scope closes (PyTorch
    warns once per process: "Overriding a previously registered kernel").
    Returns the resolved ``OpOverload``.
    """
    overload = resolve_op(op)
    _library(overload.namespace).impl(overload, chip_kernel(overload, fn, kind=kind, flops=flops), "PrivateUse1")
    return overload


def _writing_into_out(fn: Callable) -> Callable:
    """The in-place calling convention of the kernel library: results go to ``out``."""
    def kernel(*args, out, **kwargs):
        np.copyto(out, fn(*args, **kwargs), casting="unsafe")
        return out
    return kernel


def _library(namespace: str) -> torch.library.Library:
    libraries = _scopes[-1] if _scopes else _permanent
    if namespace not in libraries:
        libraries[namespace] = torch.library.Library(namespace, "IMPL")
    return libraries[namespace]


@contextlib.contextmanager
def kernel_scope():
    """Kernels registered inside the block are unregistered when it ends (even on error)."""
    libraries: dict[str, torch.library.Library] = {}
    _scopes.append(libraries)
    try:
        yield
    finally:
        _scopes.remove(libraries)
        for library in libraries.values():
            library._destroy()
