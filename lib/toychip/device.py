"""Plugging the chip into PyTorch: the ``toychip`` device name, device module and RNG.

This is step one of every out-of-tree backend (chapter 08): rename ``PrivateUse1`` to the
chip's name, generate the ``Tensor.toychip()`` / ``is_toychip`` methods and register a
*device module* -- the object PyTorch calls for ``torch.toychip.device_count()``,
``torch.manual_seed`` (via ``manual_seed_all``) and ``torch.compile``'s device checks.
This module *is* that device module: after ``import toychip``, ``torch.toychip`` is it,
with ``torch.cuda``'s API where it applies: device selection, RNG state, memory
statistics (:mod:`toychip.allocator`), streams and events (:mod:`toychip.streams`).
Where a Python backend cannot do what a C++ one does -- one device index, streams only
on the simulated clock -- the docstrings say so. The name, the spec and the index checks
come from :mod:`toychip.spec`, below every other part of the runtime.
"""
from __future__ import annotations

import sys

import numpy as np
import torch
from torch.utils.backend_registration import _setup_privateuseone_for_python_backend

from .allocator import ALLOCATOR
from .spec import NAME, check_index, get_spec
# The device module's stream API (torch.toychip.Stream, ...), implemented in toychip.streams.
from .streams import Event, Stream, current_stream, default_stream, set_stream, stream

_rng = np.random.Generator(np.random.PCG64(0))


def is_available() -> bool:
    """The simulated chip is always present."""
    return True


def is_initialized() -> bool:
    return True


def _is_in_bad_fork() -> bool:
    return False


def device_count() -> int:
    """Number of addressable chips (``ChipSpec.device_count``)."""
    return get_spec().device_count


def current_device() -> int:
    return 0


def set_device(device) -> None:
    """Select the chip new tensors go to. Only ``toychip:0`` exists in practice: tensors of a
    Python backend are made by ``torch._C._acc.create_empty_tensor``, which puts every one
    on index 0, so another index raises (a C++ backend would switch its device guard)."""
    check_index(device)
    index = device if isinstance(device, int) else torch.device(device).index
    if index not in (None, 0):
        raise NotImplementedError(f"toychip can only place tensors on toychip:0, not index {index}")


class device:
    """``with torch.toychip.device(0):`` -- selects the chip (see :func:`set_device`)."""

    def __init__(self, device):
        self.index = device

    def __enter__(self):
        set_device(self.index)
        return self

    def __exit__(self, *exc):
        return False


def synchronize(device=None) -> None:
    """Wait for queued kernels: the toy chip runs synchronously, so only the index is checked."""
    check_index(device)


def get_amp_supported_dtype() -> list[torch.dtype]:
    """The dtypes ``torch.autocast("toychip", dtype=...)`` accepts (see toychip.autocast)."""
    return [torch.float16, torch.bfloat16]


def manual_seed_all(seed: int) -> None:
    """Seed the chip's RNG (``torch.manual_seed`` calls this for every custom device)."""
    global _rng
    _rng = np.random.Generator(np.random.PCG64(int(seed)))


manual_seed = manual_seed_all


def rng() -> np.random.Generator:
    """The chip's random generator, used by ``normal_``/``uniform_`` kernels."""
    return _rng


_STATE_FIELDS = (("state", 16), ("inc", 16))  # PCG64's two 128-bit words


def get_rng_state(device=None) -> torch.Tensor:
    """The RNG state as a CPU uint8 tensor, like ``torch.cuda.get_rng_state``.

    ``torch.library.opcheck`` and ``torch.random.fork_rng`` save and restore it around
    every run on an available accelerator, so the device module must provide it.
    """
    check_index(device)
    state = _rng.bit_generator.state
    words = b"".join(state["state"][name].to_bytes(size, "little") for name, size in _STATE_FIELDS)
    tail = bytes([state["has_uint32"]]) + state["uinteger"].to_bytes(4, "little")
    return torch.frombuffer(bytearray(words + tail), dtype=torch.uint8)


def set_rng_state(new_state: torch.Tensor, device=None) -> None:
    """Restore a state returned by :func:`get_rng_state`."""
    check_index(device)
    data, fields, offset = bytes(new_state.cpu().numpy()), {}, 0
    for name, size in _STATE_FIELDS:
        fields[name] = int.from_bytes(data[offset:offset + size], "little")
        offset += size
    _rng.bit_generator.state = {"bit_generator": "PCG64", "state": fields, "has_uint32": data[offset],
                                "uinteger": int.from_bytes(data[offset + 1:offset + 5], "little")}


# --------------------------------------------------------------------------- memory
# torch.cuda's memory functions, answered by the caching allocator (toychip.allocator).
def memory_allocated(device=None) -> int:
    """Bytes of device memory in blocks that tensors hold now (size classes, so >= tensor bytes)."""
    check_index(device)
    return ALLOCATOR.allocated()


def max_memory_allocated(device=None) -> int:
    """The most :func:`memory_allocated` has been since start or :func:`reset_peak_memory_stats`."""
    check_index(device)
    return ALLOCATOR.peak_allocated()


def memory_reserved(device=None) -> int:
    """Bytes the allocator holds from the device: blocks in use plus cached free blocks."""
    check_index(device)
    return ALLOCATOR.reserved()


def max_memory_reserved(device=None) -> int:
    check_index(device)
    return ALLOCATOR.peak_reserved()


def reset_peak_memory_stats(device=None) -> None:
    """Peaks restart from the current values."""
    check_index(device)
    ALLOCATOR.reset_peak()


def reset_accumulated_memory_stats(device=None) -> None:
    """As ``torch.cuda``'s: the ``*.allocated`` / ``*.freed`` totals and the device-allocation
    counts restart from 0; ``*.current`` and ``*.peak`` stay."""
    check_index(device)
    ALLOCATOR.reset_accumulated()


def memory_stats(device=None) -> dict:
    """``torch.cuda.memory_stats()``'s keys that apply here (``"allocated_bytes.all.current"`` ...)."""
    check_index(device)
    return ALLOCATOR.memory_stats()


def memory_snapshot() -> list[dict]:
    """Every reserved block: ``size`` (its class), ``requested`` bytes, ``state`` active/cached."""
    return ALLOCATOR.snapshot()


def memory_summary(device=None, abbreviated: bool = False) -> str:
    """Allocated, requested and reserved bytes, and the fragmentation between them."""
    check_index(device)
    return ALLOCATOR.summary()


def empty_cache() -> None:
    """Give the allocator's cached blocks back to the device (tensors keep theirs)."""
    ALLOCATOR.empty_cache()


def register() -> None:
    """Rename PrivateUse1 to ``toychip`` and install this module as its device module."""
    if torch._C._get_privateuse1_backend_name() == NAME:
        return
    _setup_privateuseone_for_python_backend(NAME, backend_module=sys.modules[__name__])
    # The autograd engine would run toychip backward passes on a per-device worker thread
    # whose shutdown calls the Python device guard after interpreter finalisation and
    # aborts the process at exit (torch 2.13). Running backward on the calling thread
    # avoids the thread altogether (it also keeps lazy mode on one thread).
    torch._C._set_multithreading_enabled(False)
