"""The ledger: which profiles are open, and the charges the chip's work posts to them.

Everything that costs simulated time -- a kernel launch, a host<->device copy, a device
allocation -- is charged here, priced with the spec plugged in now (:mod:`toychip.spec`)
and posted to every open profile on the stream work is queued on. The ledger sits below
the rest of the runtime so that kernels, the allocator, memory and streams can all charge
it without importing the clock; :mod:`toychip.clock` builds ``toychip.profile()`` on top.

Charging only happens while a profile is open: the eager hot path asks :func:`charging`
before it counts bytes. A profile is anything with ``add_kernel``, ``add_copy`` and
``add_malloc`` (:class:`toychip.clock.Profile`).
"""
from __future__ import annotations

import contextlib

import numpy as np

from . import runtime
from .spec import get_spec

# Open profiles, innermost last; each receives every charge (a list so nesting works).
_open: list = []


def charging() -> bool:
    """Whether a profile is open, so that charges are recorded at all."""
    return bool(_open)


def open_profiles() -> tuple:
    """The open profiles, outermost first."""
    return tuple(_open)


@contextlib.contextmanager
def opened(profile):
    """Inside the block, every charge is posted to ``profile`` too."""
    _open.append(profile)
    try:
        yield profile
    finally:
        _open.remove(profile)


def _stream() -> int:
    """The stream work is queued on: the calling thread's current stream on the current chip,
    as the runtime's device guard keeps it (``torch.accelerator.set_stream``, ``with stream:``)."""
    return runtime.current_stream_id(runtime.current_device())


def array_bytes(values) -> int:
    """Bytes a kernel moves for these arguments/results (NumPy arrays; others are free)."""
    return sum(v.nbytes for v in values if isinstance(v, np.ndarray))


def charge_kernel(name: str, nbytes: int, flops: int) -> None:
    """Charge one kernel launch to every open profile."""
    time_us, stream = get_spec().kernel_us(nbytes, flops), _stream()
    for p in _open:
        p.add_kernel(name, stream, time_us, nbytes, flops)


def charge_copy(direction: str, nbytes: int) -> None:
    """Charge one host<->device copy (``direction`` is ``"to_chip"`` or ``"to_cpu"``)."""
    time_us, stream = get_spec().copy_us_for(nbytes), _stream()
    for p in _open:
        p.add_copy(direction, stream, time_us, nbytes)


def charge_malloc(nbytes: int) -> None:
    """Charge one device allocation (a caching-allocator miss of ``nbytes``); the allocator
    calls this on every miss, so with no profile open it returns at once."""
    if not _open:
        return
    time_us, stream = get_spec().malloc_us, _stream()
    for p in _open:
        p.add_malloc(stream, time_us, nbytes)
