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

What is simulated and what is not: the chip computes synchronously -- a kernel has
finished (in NumPy) when its call returns -- so results never depend on streams, and
``query()`` / ``synchronize()`` have nothing to wait for. Streams shape the *timeline*
of an open ``toychip.profile()``: each stream has its own clock, an op starts when its
stream and its engine are free, ``Event.record`` notes a stream's time, ``Event.wait``
makes a stream wait for it and ``Event.elapsed_time`` is simulated milliseconds.

Why Python objects and not ``torch.Stream``: PyTorch's streams for a device go through
its C++ device guard, and the guard a Python backend registers in torch 2.13
(``torch._C._acc.DeviceGuard``) forwards only ``type_``: its streams are always the
default stream, ``torch.accelerator.current_stream()`` returns that one, and
``torch.accelerator.synchronize()`` raises. A C++ backend (OpenReg, torch_npu)
implements ``DeviceGuardImplInterface`` instead.
"""
from __future__ import annotations

import contextlib
import itertools

import torch

from . import ledger
from .spec import NAME, check_index

_ids = itertools.count(1)  # 0 is the default stream


class Stream:
    """A queue of chip work with its own simulated timeline (``torch.cuda.Stream``'s API)."""

    def __init__(self, device=None, priority: int = 0, *, stream_id: int | None = None):
        check_index(device)
        self.stream_id = next(_ids) if stream_id is None else stream_id
        self.priority = priority

    @property
    def device(self) -> torch.device:
        return torch.device(NAME, 0)

    def wait_event(self, event: "Event") -> None:
        """Work queued on this stream from now on starts after ``event``."""
        event.wait(self)

    def wait_stream(self, stream: "Stream") -> None:
        """Work queued on this stream from now on starts after everything queued on ``stream``."""
        self.wait_event(stream.record_event())

    def record_event(self, event: "Event | None" = None) -> "Event":
        event = Event() if event is None else event
        event.record(self)
        return event

    def query(self) -> bool:
        """Always done: the chip runs each kernel to completion when it is called."""
        return True

    def synchronize(self) -> None:
        """Nothing to wait for (see :meth:`query`)."""

    def __enter__(self):
        self._context = stream(self)
        self._context.__enter__()
        return self

    def __exit__(self, *exc):
        self._context.__exit__(*exc)

    def __eq__(self, other) -> bool:
        return isinstance(other, Stream) and other.stream_id == self.stream_id

    def __hash__(self) -> int:
        return hash((NAME, self.stream_id))

    def __repr__(self) -> str:
        return f"<torch.toychip.Stream device={self.device} stream_id={self.stream_id}>"


class Event:
    """A marker in a stream's simulated timeline (``torch.cuda.Event``'s API).

    Times exist only inside an open ``toychip.profile()``: the simulated clock runs there.
    """

    def __init__(self, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False):
        self.enable_timing = enable_timing
        self._times: list[tuple] = []  # (profile, stream time in us) for each open profile

    def record(self, stream: Stream | None = None) -> None:
        """Mark the point the stream (default: the current one) has reached."""
        stream_id = (current_stream() if stream is None else stream).stream_id
        self._times = [(p, p.stream_us.get(stream_id, 0.0)) for p in ledger.open_profiles()]

    def wait(self, stream: Stream | None = None) -> None:
        """Make the stream (default: the current one) wait until this event's point."""
        stream_id = (current_stream() if stream is None else stream).stream_id
        for p, time_us in self._times:
            p.stream_us[stream_id] = max(p.stream_us.get(stream_id, 0.0), time_us)

    def query(self) -> bool:
        return True

    def synchronize(self) -> None:
        """Nothing to wait for: the chip computes synchronously."""

    def elapsed_time(self, end_event: "Event") -> float:
        """Simulated milliseconds from this event to ``end_event`` (both recorded in one profile)."""
        if not (self.enable_timing and end_event.enable_timing):
            raise RuntimeError("Both events must be created with enable_timing=True to measure time")
        for p, start in self._times:
            for q, end in end_event._times:
                if p is q:
                    return (end - start) / 1000.0
        raise RuntimeError("record both events inside the same toychip.profile(): the chip's "
                           "simulated clock runs only while a profile is open")

    def __repr__(self) -> str:
        return f"<torch.toychip.Event recorded={bool(self._times)}>"


_DEFAULT = Stream(stream_id=0)
_current = _DEFAULT


def current_stream(device=None) -> Stream:
    """The stream chip work is queued on now."""
    check_index(device)
    return _current


def default_stream(device=None) -> Stream:
    check_index(device)
    return _DEFAULT


def set_stream(new: Stream) -> None:
    """Queue chip work on ``new`` from now on."""
    global _current
    _current = new
    ledger.set_stream(new.stream_id)


@contextlib.contextmanager
def stream(s: Stream | None):
    """Inside the block, chip work is queued on ``s`` (``None``: no change)."""
    if s is None:
        yield
        return
    previous = _current
    set_stream(s)
    try:
        yield
    finally:
        set_stream(previous)
