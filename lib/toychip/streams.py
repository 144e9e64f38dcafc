"""Streams and events on the simulated clock: copy/compute overlap in numbers.

A *stream* is a queue of chip work that runs in order; work on different streams may
overlap. The toy chip has one compute engine (kernels) and one copy engine (host<->device
copies), each doing one thing at a time, so what overlaps is a copy with a kernel --
the classic use: load the next batch on a side stream while the model runs::

    copy_stream = torch.toychip.Stream()
    with toychip.profile() as p:
        with torch.toychip.stream(copy_stream):
            nxt = batch.to("toychip", non_blocking=True)
        loss = model(current).sum()                       # on the default stream
        torch.toychip.current_stream().wait_stream(copy_stream)
    p.elapsed_us < p.time_us                              # the copy hid behind kernels

The streams and events are PyTorch's own ``torch.Stream`` / ``torch.Event``: the chip's
C++ device guard (``csrc/ToyChipGuard``, :mod:`toychip.runtime`) makes them, keeps each
thread's current stream per device and records events, so ``torch.accelerator``'s stream
API and ``with torch.Stream(device="toychip"):`` work as they do on CUDA.
``torch.toychip.Stream``/``Event`` are those classes with ``torch.cuda``'s spelling.

What is simulated and what is not: the chip computes synchronously -- a kernel has
finished (in NumPy) when its call returns -- so results never depend on streams, and
``query()`` / ``synchronize()`` have nothing to wait for. Streams shape the *timelines*
(:class:`toychip.ledger.Timeline`) of every open ``toychip.profile()`` and of the chips'
own clock: each stream of each chip has its own clock, an op starts when its stream and
its engine are free (:mod:`toychip.ledger` asks the guard which stream work is queued on).

The guard hands each event's ``record``, ``wait``, ``synchronize`` and ``elapsed_time``, and
each stream's and device's ``synchronize``, to this module (``runtime.set_event_hooks``).
Recording notes the stream's simulated time on every timeline; waiting makes a stream wait
for that time; synchronising makes the host wait for it (for a stream or a device: for
everything queued there), so ``torch.accelerator.synchronize()`` and ``Event.synchronize()``
count as ``torch.toychip.synchronize()`` does; ``elapsed_time`` is simulated milliseconds.
The chips' clock runs while a recorded event is alive (from 0, every stream
idle: nothing is pending when it starts), so events time work with no profile open; on it,
recording an event itself takes ``ChipSpec.event_us``, so two events recorded back to back
are apart, as on a real chip. Events recorded inside one profile read that profile's
timeline instead: the work between them, as the profile adds it up.
"""
from __future__ import annotations

import contextlib
from typing import NamedTuple

import torch

from . import ledger, races, runtime
from .spec import NAME, get_spec, index_of


def _device(device) -> torch.device:
    """``None``/index/str/device -> ``toychip:N`` (``None``: the current chip)."""
    return torch.device(NAME, index_of(device))


class Stream(torch.Stream):
    """A queue of chip work with its own simulated timeline (``torch.cuda.Stream``'s API)."""

    def __new__(cls, device=None, priority: int = 0, **kwargs):
        if "stream_id" in kwargs:  # wrapping a stream the guard already made
            return super().__new__(cls, **kwargs)
        return super().__new__(cls, device=_device(device), priority=priority)

    def __repr__(self) -> str:
        return f"<torch.toychip.Stream device={self.device} stream_id={self.stream_id}>"


def host_waits(stream: ledger.StreamKey | None = None, device: int | None = None) -> None:
    """The host waits for ``stream`` (``None``: every stream, of ``device`` if given): on the
    simulated clock and for the race report."""
    ledger.host_waits(stream, device)
    if stream is None:
        races.synchronize(device)
    else:
        races.host_waits(stream)


def Event(enable_timing: bool = False, blocking: bool = False, interprocess: bool = False) -> torch.Event:
    """A marker in a stream's simulated timeline: a ``torch.Event`` of the chip (``torch.cuda.Event``'s
    arguments). A function, not a subclass: ``torch.Event.elapsed_time`` accepts only ``torch.Event``
    itself. Its times are simulated (see the module docstring)."""
    return torch.Event(device=NAME, enable_timing=enable_timing, blocking=blocking, interprocess=interprocess)


class Recorded(NamedTuple):
    """Where an event was recorded, and the time it marks on each timeline then running:
    the profiles open (outermost first), then the chips' clock."""

    device: int
    marks: list[tuple[ledger.Timeline, float]]


# event id -> where and when it was last recorded, while the event is alive
_recorded: dict[int, Recorded] = {}


def _on_record(event_id: int, device: int, stream_id: int) -> None:
    """Mark the stream's time on every timeline; on the clock, recording takes ``event_us``."""
    stream = (device, stream_id)
    clock = ledger.start_clock()
    clock.schedule("event", stream, None, get_spec().event_us)
    marks = [(t, t.now(stream)) for t in (*ledger.open_profiles(), clock)]
    _recorded[event_id] = Recorded(device, marks)
    races.record_event(event_id, stream)


def _on_block(event_id: int, device: int, stream_id: int) -> None:
    for timeline, time_us in _recorded[event_id].marks:
        timeline.wait_until((device, stream_id), time_us)
    races.wait_event(event_id, (device, stream_id))


def _on_elapsed(start_id: int, end_id: int) -> float:
    """Milliseconds between two events on the first timeline both marked: a profile open
    at both records, else the clock (which ran all along: the first event kept it running)."""
    start, end = _recorded[start_id], _recorded[end_id]
    if start.device != end.device:
        raise RuntimeError(f"elapsed_time between events on {NAME}:{start.device} and {NAME}:{end.device}: "
                           "record both events on one chip")
    ends = {id(t): time_us for t, time_us in end.marks}
    return next(ends[id(t)] - time_us for t, time_us in start.marks if id(t) in ends) / 1000.0


def _on_synchronize_stream(device: int, stream_id: int) -> None:
    """``Stream.synchronize``: later work on any stream starts after this stream's."""
    host_waits((device, stream_id))


def _on_synchronize_event(event_id: int) -> None:
    """``Event.synchronize``: the host waits for the work its stream had queued when it was recorded."""
    recorded = _recorded.get(event_id)
    if recorded is not None:
        for timeline, time_us in recorded.marks:
            timeline.host_waits_until(time_us)
    races.host_waits_for_event(event_id)


def _on_synchronize_device(device: int) -> None:
    """``torch.accelerator.synchronize(device)``: the host waits for every stream of the chip."""
    host_waits(device=device)


def _on_destroy(event_id: int) -> None:
    _recorded.pop(event_id, None)
    races.forget_event(event_id)
    if not _recorded:
        ledger.stop_clock()


def current_stream(device=None) -> Stream:
    """The stream chip work is queued on now (by this thread, on ``device``)."""
    current = torch.accelerator.current_stream(_device(device))
    return Stream(stream_id=current.stream_id, device_index=current.device_index, device_type=current.device_type)


def default_stream(device=None) -> Stream:
    """Stream 0 of ``device``: where work goes unless a stream is selected."""
    current = torch.accelerator.current_stream(_device(device))
    return Stream(stream_id=0, device_index=current.device_index, device_type=current.device_type)


def set_stream(new: torch.Stream) -> None:
    """Queue chip work on ``new`` from now on (``torch.accelerator.set_stream``)."""
    torch.accelerator.set_stream(new)


@contextlib.contextmanager
def stream(s: torch.Stream | None):
    """Inside the block, chip work is queued on ``s`` (``None``: no change); afterwards the
    previous stream and device are current again (``torch.Stream``'s own context manager)."""
    if s is None:
        yield
        return
    with s:
        yield


def register() -> None:
    """Let the guard's events and synchronisations read and move the simulated clock."""
    runtime.set_event_hooks(_on_record, _on_block, _on_elapsed, _on_destroy,
                            _on_synchronize_stream, _on_synchronize_event, _on_synchronize_device)
