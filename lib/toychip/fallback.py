"""The CPU fallback: any ATen op without a chip kernel runs on the host, copies charged.

Registered as a *boxed* fallback for ``PrivateUse1``
(``torch.library.Library("_", "IMPL").fallback(fn, "PrivateUse1")``): the dispatcher
calls it with the op and its arguments whenever the op table has no entry. It copies
chip arguments to the CPU, runs the CPU kernel, copies mutated arguments and results
back, and counts it -- so ``toychip.coverage()`` can tell a porting engineer which ops
still need kernels (chapter 08), and ``toychip.strict()`` turns every fallback into an
error naming the op.

The function behind the fallback is swappable (chapter 07 has the learner write one)::

    with toychip.use_fallback(my_fallback):   # my_fallback(op, *args, **kwargs)
        torch.cumsum(x, 0)                    # counted and strict-checked as usual
"""
from __future__ import annotations

import contextlib
from collections import Counter
from dataclasses import dataclass

import numpy as np
import torch

from . import ledger
from .dtypes import host_array, host_tensor, store
from .memory import as_numpy, check_dtype, device_of, resize, wrap
from .op_table import NATIVE_COUNTS, set_decline_handler

FALLBACK_COUNTS: Counter = Counter()
_strict = False


class FallbackError(NotImplementedError):
    """Raised in strict mode when an op would fall back to the CPU."""


@contextlib.contextmanager
def strict(enabled: bool = True):
    """Inside the block, an op without a chip kernel raises :class:`FallbackError`."""
    global _strict
    previous, _strict = _strict, enabled
    try:
        yield
    finally:
        _strict = previous


@dataclass
class Coverage:
    """Which ATen ops ran on chip kernels and which fell back to the CPU, with counts."""

    native: dict
    fallback: dict

    @property
    def native_fraction(self) -> float:
        """Share of op calls that ran natively."""
        total = sum(self.native.values()) + sum(self.fallback.values())
        return sum(self.native.values()) / total if total else 1.0

    def __str__(self) -> str:
        lines = [f"{'op':<44} {'where':<9} calls"]
        for name, n in sorted(self.native.items()):
            lines.append(f"{name:<44} {'chip':<9} {n}")
        for name, n in sorted(self.fallback.items()):
            lines.append(f"{name:<44} {'cpu':<9} {n}")
        lines.append(f"native fraction: {self.native_fraction:.1%}")
        return "\n".join(lines)


def coverage() -> Coverage:
    """A snapshot of the op counts since import (or the last :func:`reset_coverage`)."""
    return Coverage(dict(NATIVE_COUNTS), dict(FALLBACK_COUNTS))


def reset_coverage() -> None:
    NATIVE_COUNTS.clear()
    FALLBACK_COUNTS.clear()


def _is_chip(value) -> bool:
    return isinstance(value, torch.Tensor) and value.device.type == "toychip"


def _to_cpu(value):
    if _is_chip(value):
        data = np.asarray(as_numpy(value), order="C")
        if ledger.charging():
            ledger.charge_copy("to_cpu", data.nbytes)
        return host_tensor(data).clone()  # owned by torch: CPU kernels may resize it
    if isinstance(value, (list, tuple)):
        return type(value)(_to_cpu(v) for v in value)
    if isinstance(value, torch.device) and value.type == "toychip":
        return torch.device("cpu")
    return value


def _to_chip(value, device: int):
    if isinstance(value, torch.Tensor) and value.device.type == "cpu":
        check_dtype(value.dtype)  # a CPU result the chip cannot hold (a quantized tensor): say so
        if ledger.charging():
            ledger.charge_copy("to_chip", value.nbytes)
        return wrap(host_array(value), device=device)
    if isinstance(value, (list, tuple)):
        return type(value)(_to_chip(v, device) for v in value)
    return value


def _result_device(args, kwargs) -> int:
    """Where new results go: a factory's ``device=``, else the first chip tensor's chip."""
    device = kwargs.get("device")
    if isinstance(device, torch.device) and device.type == "toychip" and device.index is not None:
        return device.index
    return device_of(args)


def _write_back(chip: torch.Tensor, cpu: torch.Tensor) -> None:
    """Copy a mutated CPU argument back into its chip tensor.

    If the op resized its CPU copy (an ``out=`` of the wrong shape), the chip tensor is
    resized the same way first -- contiguous, at its own storage offset, the memory grown
    only if needed -- so an ``out=`` that views a larger tensor writes into that tensor's
    memory, as on the CPU, instead of being given memory of its own.
    """
    if ledger.charging():
        ledger.charge_copy("to_chip", cpu.nbytes)
    if tuple(chip.shape) != tuple(cpu.shape):
        resize(chip, cpu.shape)
    store(as_numpy(chip), host_array(cpu), chip.dtype)


def _tensors_for_numbers(op, args) -> tuple:
    """A scalar that C++ wrapped as a tensor (``remainder(t, 3)``) reaches a boxed Python
    fallback as a plain number; the op's schema wants a tensor back."""
    schema_args = op._schema.arguments
    return tuple(torch.tensor(a) if isinstance(a, (int, float, bool)) and i < len(schema_args)
                 and isinstance(schema_args[i].type, torch.TensorType) else a for i, a in enumerate(args))


def cpu_fallback(op, *args, **kwargs):
    """The default fallback: run ``op`` on the CPU, copy mutated arguments and results back.

    Arguments the schema marks as written (``Tensor(a!)``: in-place ``self``, ``out=``)
    receive the CPU result and are returned themselves, as the schema's alias
    annotations promise; other results come back as new chip tensors.
    """
    device = _result_device(args, kwargs)
    cpu_args, cpu_kwargs = _to_cpu(_tensors_for_numbers(op, args)), {k: _to_cpu(v) for k, v in kwargs.items()}
    result = op(*cpu_args, **cpu_kwargs)
    schema = op._schema
    written = {}  # alias set -> chip tensor written by the op
    for i, arg in enumerate(schema.arguments):
        info = arg.alias_info
        if info is None or not info.is_write:
            continue
        chip = args[i] if i < len(args) and not arg.kwarg_only else kwargs.get(arg.name)
        cpu = cpu_args[i] if i < len(args) and not arg.kwarg_only else cpu_kwargs.get(arg.name)
        if _is_chip(chip):
            _write_back(chip, cpu)
            written[frozenset(info.before_set)] = chip
    returns = schema.returns
    results = result if isinstance(result, tuple) else (result,)
    out = []
    for ret, value in zip(returns, results):
        info = ret.alias_info
        key = frozenset(info.before_set) if info is not None else None
        out.append(written[key] if key in written else _to_chip(value, device))
    if not returns:
        return None
    return tuple(out) if isinstance(result, tuple) else out[0]


_fallback = cpu_fallback


def set_fallback(fn=None):
    """Make ``fn(op, *args, **kwargs)`` the chip's fallback (``None``: the default); returns the previous one."""
    global _fallback
    previous, _fallback = _fallback, cpu_fallback if fn is None else fn
    return previous


@contextlib.contextmanager
def use_fallback(fn):
    """Inside the block, ops without a chip kernel run ``fn(op, *args, **kwargs)``."""
    previous = set_fallback(fn)
    try:
        yield
    finally:
        set_fallback(previous)


def _boxed_fallback(op, *args, **kwargs):
    """What the dispatcher calls for PrivateUse1 when no kernel is registered: count, check, run."""
    name = str(op).removeprefix("aten.")
    if _strict:
        raise FallbackError(
            f"toychip strict mode: aten.{name} has no chip kernel and would fall back to the CPU")
    FALLBACK_COUNTS[name] += 1
    return _fallback(op, *args, **kwargs)


_LIB = None


def register() -> None:
    """Install the boxed fallback for PrivateUse1 (idempotent)."""
    global _LIB
    if _LIB is None:
        _LIB = torch.library.Library("_", "IMPL")
        _LIB.fallback(_boxed_fallback, "PrivateUse1")
        set_decline_handler(_boxed_fallback)
