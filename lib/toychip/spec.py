"""What the chip is: its device name, its data sheet, the spec plugged in now, its indices.

The bottom of the runtime: whatever names the device, charges time or checks a device
index reads it here, not from :mod:`toychip.device` (which registers with PyTorch, above).

The data sheet (:class:`ChipSpec`) holds the numbers the performance model charges time
with. A real vendor publishes launch latency, memory bandwidth, peak compute and host-link
bandwidth; the toy chip's simulated clock (:mod:`toychip.clock`) turns every kernel
launch and every host<->device copy into microseconds with exactly these numbers, so a
program's simulated time depends only on what it runs, never on the machine it runs on.

Taught in chapter 00 (section 4, the roofline a launch is charged, and exercise
00.roofline), quoted in chapter 04, and used by every exercise graded on speed.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from . import runtime

NAME = "toychip"
"""The device type PyTorch knows the chip by (``PrivateUse1`` renamed, see :mod:`toychip.device`)."""


@dataclass(frozen=True)
class ChipSpec:
    """A roofline chip: one kernel costs ``launch + max(bytes / bandwidth, flops / peak)``.

    Fields are in the units the formula wants, so the cost functions stay one line:

    * ``launch_us``: fixed cost of every kernel launch (driver + scheduling); this is
      what fusion saves.
    * ``mem_bytes_per_us``: device memory bandwidth (1 GB/s = 1e3 bytes/us).
    * ``flops_per_us``: peak arithmetic throughput (1 GFLOP/s = 1e3 flop/us).
    * ``copy_us`` / ``link_bytes_per_us``: fixed cost and bandwidth of one host<->device
      copy over the host link (PCIe-like); this is what a CPU fallback pays twice.
    * ``device_count``: how many chips ``toychip:N`` may address.
    * ``malloc_us``: cost of reserving a new block of device memory (``cudaMalloc``) when
      the caching allocator misses (:mod:`toychip.allocator`); a hit costs nothing. 0 by
      default, so a program's simulated time does not depend on what ran before it.
    * ``event_us``: what recording an event takes on its stream (``cudaEventRecord``), on
      the chip's own clock (:mod:`toychip.streams`); profiles charge work only.
    * ``compute_units``: what Inductor reads as the SM count (``multi_processor_count``).
      With more than one, it splits a long reduction with few results into two kernels
      (partial results, then their combination); the clock still runs one kernel at a time.
    """

    name: str = "toychip-v1"
    launch_us: float = 5.0
    mem_bytes_per_us: float = 200e3      # 200 GB/s
    flops_per_us: float = 10e6           # 10 TFLOP/s
    copy_us: float = 10.0
    link_bytes_per_us: float = 16e3      # 16 GB/s
    device_count: int = 2
    malloc_us: float = 0.0
    event_us: float = 1.0
    compute_units: int = 1

    def kernel_us(self, nbytes: int, flops: int) -> float:
        """Simulated time of one kernel that moves ``nbytes`` and computes ``flops``."""
        return self.launch_us + max(nbytes / self.mem_bytes_per_us, flops / self.flops_per_us)

    @property
    def multi_processor_count(self) -> int:
        """``compute_units`` by the name ``torch.cuda.get_device_properties`` gives SMs."""
        return self.compute_units

    def copy_us_for(self, nbytes: int) -> float:
        """Simulated time of one host<->device copy of ``nbytes``."""
        return self.copy_us + nbytes / self.link_bytes_per_us


DEFAULT_SPEC = ChipSpec()


_spec: ChipSpec = DEFAULT_SPEC
# Called after every set_spec: caches above the chip that hold the spec's answers
# (Inductor's device properties, toychip.inductor) let go of them.
_spec_listeners: list = []


def get_spec() -> ChipSpec:
    """The spec of the chip currently plugged in (what the simulated clock charges)."""
    return _spec


def set_spec(spec: ChipSpec) -> ChipSpec:
    """Plug in a different chip spec; returns the previous one."""
    global _spec
    previous, _spec = _spec, spec
    for listener in _spec_listeners:
        listener()
    return previous


def on_spec_change(listener) -> None:
    """Call ``listener()`` whenever a spec is plugged in."""
    if listener not in _spec_listeners:
        _spec_listeners.append(listener)


def check_index(device) -> None:
    """Raise a clear error if ``device`` names a chip this machine does not have."""
    if device is None:
        return
    index = device if isinstance(device, int) else torch.device(device).index
    if index is not None and not 0 <= index < _spec.device_count:
        raise RuntimeError(
            f"toychip device index {index} is out of range: this machine has "
            f"{_spec.device_count} toychip device(s) (valid: 0..{_spec.device_count - 1})")


def index_of(device) -> int:
    """The chip ``device`` names -- an int, ``"toychip:1"``, a ``torch.device``; ``None`` or no
    index: the current one (the runtime's, per thread) -- after :func:`check_index`."""
    check_index(device)
    index = None if device is None else device if isinstance(device, int) else torch.device(device).index
    return runtime.current_device() if index is None else index
