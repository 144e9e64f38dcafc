"""The chip's C++ runtime, from Python: devices, streams and events, memory, generators.

``import toychip.runtime`` loads ``toychip._C`` (compiled from ``toychip/csrc`` on first
import, see :mod:`toychip.runtime_build`). Loading it registers, for ``PrivateUse1``, what
a C++ backend registers (OpenReg, torch_npu): the device guard (devices, their dtypes for
``torch.accelerator.get_device_capability``, streams, events), the hooks (generators, pinned
memory, pointer -> device, ``resize_``), the device allocator, the pinned-memory host
allocator, the tensors' backend metadata (``torch._utils.set_tensor_metadata``, kept by
``torch.save``/``torch.load``), the profiler stubs
(``torch.autograd.profiler.profile(use_device="toychip")``) and a Kineto activity profiler
(``torch.profiler.profile(activities=[..., ProfilerActivity.PrivateUse1])``). The kernels stay Python/NumPy
and the simulated clock stays Python: the runtime calls back into it through hooks.

Devices::

    set_device_count(n)        # before the first tensor (default 2); raises after
    device_count(); current_device(); set_device(i); exchange_device(i) -> previous
    register_fork_handler()    # at initialisation: a child forked after it is in a bad fork
    is_in_bad_fork()           # this process was forked from one that had initialised the chip

Memory (real host memory, 64-byte aligned, tagged ``toychip:i``)::

    empty_strided(size, stride, dtype, device_index) -> torch.Tensor   # no dispatcher
    buffer(storage) -> np.ndarray      # flat uint8 view of its bytes; does NOT own them
    adopt(array, dtype, device_index) -> torch.Tensor   # over a C-contiguous array's memory (no copy)
    adopt_into(storage, array)         # the storage's memory becomes the array's (the old is freed)
    resize_storage_bytes(storage, nbytes)   # what UntypedStorage.resize_ does
    device_memory_stats(device_index) -> dict   # the real allocator's own counters
    allocator_stats(device_index) -> dict       # what torch.accelerator.memory_stats reads
    device_of(address) -> int | None            # the device a pointer is on (getDeviceFromPtr)
    set_memory_hooks(stats, reset_peak, reset_accumulated, empty_cache); memory_hooks()

``buffer``'s array aliases the storage's memory (writes go through) and holds no
reference to it: keep the storage alive while using it, and take a new one after a
resize. ``adopt`` is how a kernel's result (a fresh NumPy array) becomes chip memory
without a copy: the storage holds the array until it frees or resizes that memory.
``set_memory_hooks`` points ``torch.accelerator.memory_*`` at the simulated
caching allocator: ``stats(device) -> dict`` with ``torch.cuda.memory_stats()`` keys
(``"allocated_bytes.all.current"`` ...), ``reset_peak(device)``,
``reset_accumulated(device)``, ``empty_cache()``; ``None`` for all four unregisters.

Streams and events (the guard's; times from the simulated clock)::

    current_stream_id(device_index) -> int      # of the calling thread; 0 is the default
    set_event_hooks(record, block, elapsed, destroy,
                    synchronize_stream=None, synchronize_event=None, synchronize_device=None)
    event_hooks()                               # the seven given last

``record(event_id, device, stream_id)``, ``block(event_id, device, stream_id)``,
``elapsed(start_id, end_id) -> float ms``, ``destroy(event_id)``; the host waiting in
``Stream.synchronize`` / ``Event.synchronize`` / ``torch.accelerator.synchronize``:
``synchronize_stream(device, stream_id)``, ``synchronize_event(event_id)``,
``synchronize_device(device)``. Called with the GIL held. Without them ``record``/``wait``
/``synchronize`` do nothing and ``elapsed_time`` raises.

Profiler (the Kineto activity profiler's Python half, :mod:`toychip.kineto`)::

    set_profiler_hooks(start, stop); profiler_hooks()   # the two given last
    launch_stamp() -> (correlation_id, now_ns)  # the CPU op launching chip work (0: none), c10::getTime()

``start(origin_ns)`` when a ``torch.profiler`` trace with ``ProfilerActivity.PrivateUse1``
starts recording, ``stop()`` when it stops: it returns what the chip ran, as
``(name, is_copy, device, stream, start_ns, duration_ns, launch_ns, correlation_id)`` tuples.

Generators (a CPU-style mt19937 per device, ``torch.Generator("toychip")``)::

    default_generator(device_index) -> torch.Generator
    draw_seed(generator_or_None, device_index) -> int   # 63 bits, for a NumPy kernel
"""
from __future__ import annotations

from .runtime_build import BuildError, ensure_built, exit_if_command, load

try:
    _C = load(ensure_built())
except BuildError as error:
    exit_if_command(error)  # `python -m toychip.runtime_build` says why without a traceback
    raise

set_device_count = _C.set_device_count
device_count = _C.device_count
current_device = _C.current_device
set_device = _C.set_device
exchange_device = _C.exchange_device
register_fork_handler = _C.register_fork_handler
is_in_bad_fork = _C.is_in_bad_fork

empty_strided = _C.empty_strided
buffer = _C.buffer
adopt = _C.adopt
adopt_into = _C.adopt_into
resize_storage_bytes = _C.resize_storage_bytes
device_memory_stats = _C.device_memory_stats
allocator_stats = _C.allocator_stats
device_of = _C.device_of
current_stream_id = _C.current_stream_id

set_memory_hooks = _C.set_memory_hooks
memory_hooks = _C.memory_hooks
set_event_hooks = _C.set_event_hooks
event_hooks = _C.event_hooks

set_profiler_hooks = _C.set_profiler_hooks
profiler_hooks = _C.profiler_hooks
launch_stamp = _C.launch_stamp

default_generator = _C.default_generator
draw_seed = _C.draw_seed

__all__ = [
    "set_device_count", "device_count", "current_device", "set_device", "exchange_device",
    "register_fork_handler", "is_in_bad_fork",
    "empty_strided", "buffer", "adopt", "adopt_into", "resize_storage_bytes", "device_memory_stats", "allocator_stats", "device_of",
    "set_memory_hooks", "memory_hooks", "current_stream_id", "set_event_hooks", "event_hooks",
    "set_profiler_hooks", "profiler_hooks", "launch_stamp",
    "default_generator", "draw_seed",
]
