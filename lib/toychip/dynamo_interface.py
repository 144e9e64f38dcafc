"""The chip's Dynamo device interface: what the compiler stack asks a device at compile time.

``torch._dynamo.device_interface`` keeps one ``DeviceInterface`` class per device type
(``CudaInterface``, ``XpuInterface``, ...). Device-agnostic code in Dynamo and Inductor
calls ``get_interface_for_device("cuda").current_device()`` instead of ``torch.cuda``
directly; Dynamo also learns from the registered interfaces which functions make streams
and events (``interface.stream``, ``interface.current_stream``, ``interface.Event``).
A vendor registers its own class with ``register_interface_for_device`` -- from Python,
as :func:`register` does here.

:class:`ToychipInterface` mirrors ``CudaInterface`` where the chip has an answer: the
device module's functions (``toychip.device``), the streams and events of
:mod:`toychip.streams`, device memory, and the :class:`~toychip.spec.ChipSpec` as the
device properties. As on the CPU, the compute capability is empty and there is no Triton.
One limit shows through: calling the chip's stream functions (``torch.toychip.current_stream``)
inside a compiled region graph-breaks. Dynamo's reason is "file is under skip directory":
:func:`register` puts the whole package in Dynamo's skip directories (``trace_rules.add``),
streams included. The streams themselves are ``torch.Stream`` subclasses, which Dynamo
models: ``torch.accelerator.current_stream()`` in the same region stays in the graph.

Registered when a compiler first needs it -- the course's backend (:mod:`toychip.compiler`)
or Inductor (:mod:`toychip.inductor`): importing Dynamo takes seconds, which ``import
toychip`` does not pay.
"""
from __future__ import annotations

import functools

import torch
from torch._dynamo import trace_rules
from torch._dynamo.device_interface import DeviceInterface, register_interface_for_device

from . import device as chip_device, runtime, streams
from .spec import NAME, ChipSpec, check_index, get_spec


class ToychipInterface(DeviceInterface):
    """``torch._dynamo.device_interface.get_interface_for_device("toychip")``."""

    device = chip_device.device
    Event = streams.Event
    Stream = streams.Stream

    class Worker:
        """What compile workers may ask without touching the device: the chip's answers
        need no device state, so the worker asks the same functions."""

        @staticmethod
        def set_device(index: int) -> None:
            chip_device.set_device(index)

        @staticmethod
        def current_device() -> int:
            return chip_device.current_device()

        @staticmethod
        def get_device_properties(index: torch.types.Device = None) -> ChipSpec:
            check_index(index)
            return get_spec()

    current_device = staticmethod(chip_device.current_device)
    set_device = staticmethod(chip_device.set_device)
    device_count = staticmethod(chip_device.device_count)
    is_available = staticmethod(chip_device.is_available)
    synchronize = staticmethod(chip_device.synchronize)
    memory_allocated = staticmethod(chip_device.memory_allocated)
    stream = staticmethod(streams.stream)
    current_stream = staticmethod(streams.current_stream)
    set_stream = staticmethod(streams.set_stream)

    @staticmethod
    def exchange_device(index: int) -> int:
        """Select chip ``index``, returning the previous one."""
        return runtime.exchange_device(index)

    @staticmethod
    def maybe_exchange_device(index: int) -> int:
        return ToychipInterface.exchange_device(index)

    @staticmethod
    def _set_stream_by_id(stream_id: int, device_index: int, device_type: int) -> None:
        streams.set_stream(torch.Stream(stream_id=stream_id, device_index=device_index, device_type=device_type))

    @staticmethod
    def get_raw_stream(index: int) -> int:
        """The current stream's id (CUDA's is a ``cudaStream_t``; the chip's queues are ids)."""
        check_index(index)
        return runtime.current_stream_id(index)

    @staticmethod
    def is_bf16_supported(including_emulation: bool = False) -> bool:
        """bfloat16 is stored in 16 bits and computed in float32 (:mod:`toychip.dtypes`)."""
        return True

    @staticmethod
    def get_compute_capability(device: torch.types.Device = None) -> str:
        """None, as the CPU's: Inductor keys kernel heuristics by it (``DeviceProperties``)."""
        return ""


@functools.cache
def register() -> None:
    """Make ``get_interface_for_device("toychip")`` (and ``"toychip:N"``) return the chip's,
    and put the package among Dynamo's skipped files: a compiled function that calls the
    chip's Python API (``toychip.profile()``, its streams) graph-breaks there rather than
    inlining it (:mod:`toychip.untraced` keeps the dispatcher's calls into kernels out).
    Once per process: both compilers call it, and each ``trace_rules.add`` appends a directory."""
    trace_rules.add("toychip")
    register_interface_for_device(NAME, ToychipInterface)
    for index in range(chip_device.device_count()):
        register_interface_for_device(f"{NAME}:{index}", ToychipInterface)
