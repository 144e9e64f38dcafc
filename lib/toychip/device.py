"""Plugging the chip into PyTorch: the ``toychip`` device name, device module and RNG.

This is step one of every out-of-tree backend (chapter 08): rename ``PrivateUse1`` to the
chip's name, generate the ``Tensor.toychip()`` / ``is_toychip`` methods and register a
*device module* -- the object PyTorch calls for ``torch.toychip.device_count()``,
``torch.manual_seed`` (via ``manual_seed_all``) and ``torch.compile``'s device checks.
This module *is* that device module: after ``import toychip``, ``torch.toychip`` is it,
with ``torch.cuda``'s API where it applies: device selection, RNG state, memory
statistics (:mod:`toychip.allocator`), streams and events (:mod:`toychip.streams`).
Devices, the current device and the random generators are the C++ runtime's
(:mod:`toychip.runtime`: ``ChipSpec.device_count`` devices, a current device per thread,
one mt19937 generator per device, as ``torch.cuda``'s); the name, the spec and the index
checks come from :mod:`toychip.spec`, below every other part of the runtime.
"""
from __future__ import annotations

import sys

import numpy as np
import torch

from . import runtime as rt, streams
from .allocator import CachingAllocator, for_device
from .spec import NAME, check_index, get_spec, index_of
# The device module's stream API (torch.toychip.Stream, ...), implemented in toychip.streams.
from .streams import Event, Stream, current_stream, default_stream, set_stream, stream


def is_available() -> bool:
    """The simulated chip is always present."""
    return True


# Initialisation, as torch.cuda's: PyTorch calls _lazy_init before the first chip tensor
# (torch::utils::device_lazy_init). It registers the runtime's fork handler, so that a
# process forked afterwards knows it is a copy: its chip state (current devices, streams,
# the allocator's books) is the parent's, and it must not use the chip.
_initialized = False


def init() -> None:
    """Initialise the chip now rather than at its first tensor."""
    _lazy_init()


def is_initialized() -> bool:
    return _initialized and not _is_in_bad_fork()


def _is_in_bad_fork() -> bool:
    """Whether this process was forked from one that had initialised the chip."""
    return rt.is_in_bad_fork()


def _lazy_init() -> None:
    global _initialized
    if is_initialized():
        return
    if _is_in_bad_fork():
        raise RuntimeError(
            f"Cannot re-initialize {NAME} in forked subprocess. To use {NAME} with "
            "multiprocessing, you must use the 'spawn' start method"
        )
    rt.register_fork_handler()
    _initialized = True


def device_count() -> int:
    """Number of addressable chips (``ChipSpec.device_count``, given to the runtime at import)."""
    return rt.device_count()


def current_device() -> int:
    """The calling thread's current chip (0 until :func:`set_device`), as ``torch.cuda``'s."""
    return rt.current_device()


def set_device(device) -> None:
    """Select the chip new tensors go to (the runtime's current device, per thread)."""
    rt.set_device(index_of(device))


class device:
    """``with torch.toychip.device(1):`` -- selects a chip for the block, then the previous one again."""

    def __init__(self, device):
        self.index = None if device is None or device == -1 else index_of(device)
        self.previous = None

    def __enter__(self):
        if self.index is not None:
            self.previous = rt.exchange_device(self.index)
        return self

    def __exit__(self, *exc):
        if self.previous is not None:
            rt.set_device(self.previous)
        return False


def synchronize(device=None) -> None:
    """Wait for queued work: the host waits for every stream (on the simulated clock and for the
    race report, :mod:`toychip.races`); the chip computes synchronously, so nothing else is pending."""
    check_index(device)
    streams.host_waits()


def get_amp_supported_dtype() -> list[torch.dtype]:
    """The dtypes ``torch.autocast("toychip", dtype=...)`` accepts (see toychip.autocast)."""
    return [torch.float16, torch.bfloat16]


# --------------------------------------------------------------------------- RNG
# One generator per chip in the runtime (torch.Generator("toychip") makes more); NumPy
# kernels get a NumPy generator seeded from it (rng), so its state decides every number.
def manual_seed(seed: int) -> None:
    """Seed the current chip's default generator."""
    rt.default_generator(rt.current_device()).manual_seed(int(seed))


def manual_seed_all(seed: int) -> None:
    """Seed every chip's default generator (``torch.manual_seed`` calls this for custom devices)."""
    for index in range(rt.device_count()):
        rt.default_generator(index).manual_seed(int(seed))


def seed() -> None:
    """Seed the current chip's default generator with a non-deterministic number."""
    rt.default_generator(rt.current_device()).seed()


def seed_all() -> None:
    """Seed every chip's default generator with one non-deterministic number."""
    manual_seed_all(rt.default_generator(rt.current_device()).seed())


def initial_seed() -> int:
    """The seed the current chip's default generator was last seeded with."""
    return rt.default_generator(rt.current_device()).initial_seed()


def rng(generator: torch.Generator | None = None, device=None) -> np.random.Generator:
    """A NumPy generator for one ``normal_``/``uniform_`` kernel, seeded from ``generator``
    (a ``torch.Generator("toychip")``) or from ``device``'s default generator."""
    return np.random.Generator(np.random.PCG64(rt.draw_seed(generator, index_of(device))))


def get_rng_state(device=None) -> torch.Tensor:
    """The RNG state as a CPU uint8 tensor, like ``torch.cuda.get_rng_state``.

    ``torch.library.opcheck`` and ``torch.random.fork_rng`` save and restore it around
    every run on an available accelerator, so the device module must provide it.
    """
    return rt.default_generator(index_of(device)).get_state()


def set_rng_state(new_state: torch.Tensor, device=None) -> None:
    """Restore a state returned by :func:`get_rng_state`."""
    rt.default_generator(index_of(device)).set_state(new_state.cpu())


def get_rng_state_all() -> list[torch.Tensor]:
    return [get_rng_state(index) for index in range(rt.device_count())]


def set_rng_state_all(new_states) -> None:
    for index, state in enumerate(new_states):
        set_rng_state(state, index)


# --------------------------------------------------------------------------- memory
# torch.cuda's memory functions, answered by each chip's caching allocator (toychip.allocator);
# torch.accelerator.memory_* reach the same numbers through the runtime's memory hooks.
def _allocator(device=None) -> CachingAllocator:
    return for_device(index_of(device))


def memory_allocated(device=None) -> int:
    """Bytes of device memory in blocks that tensors hold now (size classes, so >= tensor bytes)."""
    return _allocator(device).allocated()


def max_memory_allocated(device=None) -> int:
    """The most :func:`memory_allocated` has been since start or :func:`reset_peak_memory_stats`."""
    return _allocator(device).peak_allocated()


def memory_reserved(device=None) -> int:
    """Bytes the allocator holds from the device: blocks in use plus cached free blocks."""
    return _allocator(device).reserved()


def max_memory_reserved(device=None) -> int:
    return _allocator(device).peak_reserved()


def reset_peak_memory_stats(device=None) -> None:
    """Peaks restart from the current values."""
    _allocator(device).reset_peak()


def reset_accumulated_memory_stats(device=None) -> None:
    """As ``torch.cuda``'s: the ``*.allocated`` / ``*.freed`` totals and the device-allocation
    counts restart from 0; ``*.current`` and ``*.peak`` stay."""
    _allocator(device).reset_accumulated()


def memory_stats(device=None) -> dict:
    """``torch.cuda.memory_stats()``'s keys that apply here (``"allocated_bytes.all.current"`` ...)."""
    return _allocator(device).memory_stats()


def memory_snapshot() -> list[dict]:
    """Every reserved block of the current chip: ``size`` (its class), ``requested`` bytes, ``state``."""
    return _allocator().snapshot()


def memory_summary(device=None, abbreviated: bool = False) -> str:
    """Allocated, requested and reserved bytes, and the fragmentation between them."""
    return _allocator(device).summary()


def empty_cache() -> None:
    """Give the current chip's cached blocks back to the device (tensors keep theirs)."""
    _allocator().empty_cache()


# The first time Inductor compiles in a process (for any device), it asks a PrivateUse1 device
# module for its code generators (torch._inductor.codegen.common.init_backend_registration).
# The package's front door installs the loader (toychip.inductor.register), so that this
# module and `import toychip` stay free of Inductor.
INDUCTOR_CLASSES = ("Scheduling", "PythonWrapperCodegen", "CppWrapperCodegen", "WrapperFxCodegen")
_inductor_classes = None


def set_inductor_classes(loader) -> None:
    """``loader()`` registers the chip with Inductor and returns its classes by name."""
    global _inductor_classes
    _inductor_classes = loader


def __getattr__(name: str):
    if name in INDUCTOR_CLASSES and _inductor_classes is not None:
        return _inductor_classes()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def register() -> None:
    """Rename PrivateUse1 to ``toychip``, install this module as its device module, and give
    the C++ runtime (loaded with this module: guard, hooks, allocators) the device count."""
    if torch._C._get_privateuse1_backend_name() == NAME:
        return
    # What torch.utils.backend_registration._setup_privateuseone_for_python_backend does,
    # less its dummy Python device guard and hooks, which would replace the runtime's.
    torch.utils.rename_privateuse1_backend(NAME)
    torch.utils.generate_methods_for_privateuse1_backend(for_storage=True)  # TypedStorage.is_toychip too
    torch._register_device_module(NAME, sys.modules[__name__])
    rt.set_device_count(get_spec().device_count)
    rt.set_memory_hooks(memory_stats, reset_peak_memory_stats, reset_accumulated_memory_stats, empty_cache)
    streams.register()
    # Backward runs on the calling thread. Otherwise the autograd engine runs each chip's
    # backward passes on a worker thread of its own: the chip's kernels, lazy mode and the
    # open profiles are Python that expects one thread, the worker starts on stream 0
    # whatever stream the caller set, and (with a Python backend's Python device guard) its
    # shutdown aborted the process at exit (torch 2.13).
    torch._C._set_multithreading_enabled(False)
