"""The ledger: which profiles are open, and the charges the chip's work posts to them.

Everything that costs simulated time -- a kernel launch, a host<->device copy, a device
allocation -- is charged here, priced with the spec plugged in now (:mod:`toychip.spec`)
and posted to every open profile on the stream work is queued on. The ledger sits below
the rest of the runtime so that kernels, the allocator, memory and streams can all charge
it without importing the clock; :mod:`toychip.clock` builds ``toychip.profile()`` on top.

Time is kept per stream of each chip (a :data:`StreamKey`) by a :class:`Timeline`: an op
starts when its stream and its chip's engine are free. Each profile is one
(:class:`toychip.clock.Profile` adds up what it is charged); the chips' own clock is another,
which runs while a recorded event can read it (:func:`start_clock`, :mod:`toychip.streams`),
so that events time work outside any profile, as a real chip's do.

The host is on the timeline too: it issues work in no time, except that a blocking copy
(``non_blocking=False``, or a host tensor that is not pinned) and ``synchronize()`` make it
wait until the stream is done (:meth:`Timeline.host_waits`). Work issued after that, on any
stream, starts no earlier -- so only a ``non_blocking=True`` copy from pinned memory
overlaps later kernels, as on CUDA.

Charging only happens while a profile is open or the clock runs: the eager hot path asks
:func:`charging` before it counts bytes.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

import numpy as np

from . import runtime
from .spec import get_spec

StreamKey = tuple[int, int]
"""A stream on the simulated clock: (chip index, stream id); stream 0 is each chip's default."""


@dataclass
class Timeline:
    """When each stream's last op ends and each chip's engines are free: per-stream clocks.

    The chip has one compute engine (kernels) and one copy engine (host<->device copies),
    each doing one op at a time, so ops on two streams of one chip overlap only if they use
    different engines; the chips themselves run side by side.
    """

    stream_us: dict[StreamKey, float] = field(default_factory=dict)
    engine_us: dict[tuple[int, str], float] = field(default_factory=dict)
    host_us: float = 0.0     # the host issues nothing before this (it waited for a stream)

    def now(self, stream: StreamKey) -> float:
        """When the last op on ``stream`` ends."""
        return self.stream_us.get(stream, 0.0)

    def schedule(self, name: str, stream: StreamKey, engine: str | None, time_us: float) -> float:
        """Put one op on ``stream`` (``engine`` None: it needs none); returns when it starts."""
        start = max(self.now(stream), self.host_us)
        if engine is not None:
            start = max(start, self.engine_us.get((stream[0], engine), 0.0))
            self.engine_us[stream[0], engine] = start + time_us
        self.stream_us[stream] = start + time_us
        return start

    def wait_until(self, stream: StreamKey, time_us: float) -> None:
        """``stream`` starts nothing more before ``time_us`` (it waits for an event)."""
        self.stream_us[stream] = max(self.now(stream), time_us)

    def host_waits(self, stream: StreamKey | None = None, device: int | None = None) -> None:
        """The host waits until ``stream`` is done (``None``: every stream, of ``device`` if given);
        later work starts after."""
        if stream is not None:
            self.host_waits_until(self.now(stream))
        else:
            self.host_waits_until(max((t for s, t in self.stream_us.items() if device in (None, s[0])), default=0.0))

    def host_waits_until(self, time_us: float) -> None:
        """The host issues nothing more before ``time_us`` (it waited for an event)."""
        self.host_us = max(self.host_us, time_us)

    # The ledger posts each charge to every open profile and to the clock through these.
    def add_kernel(self, name: str, stream: StreamKey, time_us: float, nbytes: int, flops: int) -> None:
        """One kernel launch on ``stream``: it runs on the compute engine."""
        self.schedule(name, stream, "compute", time_us)

    def add_copy(self, direction: str, stream: StreamKey, time_us: float, nbytes: int) -> None:
        """One host<->device copy on ``stream``: it runs on the copy engine."""
        self.schedule(f"copy:{direction}", stream, "copy", time_us)

    def add_malloc(self, stream: StreamKey, time_us: float, nbytes: int) -> None:
        """One block reserved from the device: it holds up its stream if it costs time."""
        if time_us:
            self.schedule("malloc", stream, None, time_us)


# Open profiles, innermost last; each receives every charge (a list so nesting works).
_open: list = []
# The chips' own clock while it runs (see start_clock), else None.
_clock: Timeline | None = None


def charging() -> bool:
    """Whether a profile is open or the clock runs, so that charges are recorded at all."""
    return bool(_open) or _clock is not None


def profiling() -> bool:
    """Whether a profile is open: memory is counted for profiles only (:mod:`toychip.memory`)."""
    return bool(_open)


def open_profiles() -> tuple:
    """The open profiles, outermost first."""
    return tuple(_open)


def start_clock() -> Timeline:
    """The chips' own clock, started from 0 with every stream idle if it was stopped: the
    chip computes synchronously, so nothing is pending when it starts. It runs, charged
    like a profile, until :func:`stop_clock`."""
    global _clock
    if _clock is None:
        _clock = Timeline()
    return _clock


def stop_clock() -> None:
    """Stop the chips' clock (nothing reads it any more); the eager hot path is free again."""
    global _clock
    _clock = None


def _timelines() -> tuple:
    """Where a charge goes: the open profiles and the running clock."""
    return tuple(_open) if _clock is None else (*_open, _clock)


@contextlib.contextmanager
def opened(profile):
    """Inside the block, every charge is posted to ``profile`` too."""
    _open.append(profile)
    try:
        yield profile
    finally:
        _open.remove(profile)


def current_stream() -> StreamKey:
    """The stream work is queued on: the calling thread's current stream on the current chip,
    as the runtime's device guard keeps it (``torch.accelerator.set_stream``, ``with stream:``)."""
    device = runtime.current_device()
    return device, runtime.current_stream_id(device)


def array_bytes(values) -> int:
    """Bytes a kernel moves for these arguments/results (NumPy arrays; others are free)."""
    return sum(v.nbytes for v in values if isinstance(v, np.ndarray))


def charge_kernel(name: str, nbytes: int, flops: int) -> None:
    """Charge one kernel launch to every open profile and the running clock."""
    time_us, stream = get_spec().kernel_us(nbytes, flops), current_stream()
    for p in _timelines():
        p.add_kernel(name, stream, time_us, nbytes, flops)


def charge_copy(direction: str, nbytes: int, blocking: bool = True) -> None:
    """Charge one host<->device copy (``direction`` is ``"to_chip"`` or ``"to_cpu"``); a
    ``blocking`` one makes the host wait for it (see the module docstring)."""
    time_us, stream = get_spec().copy_us_for(nbytes), current_stream()
    for p in _timelines():
        p.add_copy(direction, stream, time_us, nbytes)
        if blocking:
            p.host_waits(stream)


def host_waits(stream: StreamKey | None = None, device: int | None = None) -> None:
    """``synchronize()``: on every timeline, the host waits for ``stream`` (``None``: all of them,
    of ``device`` if given)."""
    for p in _timelines():
        p.host_waits(stream, device)


def charge_malloc(nbytes: int) -> None:
    """Charge one device allocation (a caching-allocator miss of ``nbytes``); the allocator
    calls this on every miss, so with nothing charged it returns at once."""
    if not charging():
        return
    time_us, stream = get_spec().malloc_us, current_stream()
    for p in _timelines():
        p.add_malloc(stream, time_us, nbytes)
