"""The chip in ``torch.profiler``: the simulated clock's ops as Kineto device activity.

``torch.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1])``
asks Kineto, PyTorch's profiling library, for device activity. The chip's C++ runtime
registers a Kineto activity profiler for PrivateUse1 (``csrc/ToyChipProfiler.cpp``, as
OpenReg's ``OpenRegActivityProfiler`` and torch_npu's ``mspti_activity_profiler`` do); this
module is its Python half. While a trace records, a :class:`LaunchTimeline` is open in the
ledger beside any ``toychip.profile()``, so every kernel and copy is scheduled on it too.
When the trace stops, its ops go to Kineto, which writes them into the same trace as the
CPU ops: one row per stream of each chip, each op linked to the CPU op that launched it
(its "External id", a flow arrow), and ``prof.key_averages()`` adds their durations up as
each op's device time::

    with torch.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        loss = model(x).sum(); loss.backward()
    prof.export_chrome_trace("step.json")     # CPU ops and the chip's kernels: one Perfetto file
    print(prof.key_averages().table(sort_by="device_time_total"))

What is simulated and what is not. Durations are the simulated clock's (the ones
``toychip.profile()`` adds up). Start times are on the profiler's clock (``c10::getTime()``,
which Kineto stamps CPU ops with): an op starts when the host launched it, its stream and
its engine are free, and the events its stream waits for are reached -- the
:class:`toychip.ledger.Timeline` rules, with each op's launch as the earliest start. So
the chip rows show when a real chip of this data sheet would have run each op had it been
launched when the toy chip was; the toy chip itself computed it synchronously, in NumPy,
during the CPU op. Kineto keeps times in integer nanoseconds: each duration is the simulated
one rounded to the nanosecond, and ``key_averages()`` shows their sums in microseconds.
Without Kineto (``torch.autograd.kineto_available()`` False; every torch 2.13 wheel has it)
the runtime is built without the activity profiler and :func:`require` says why.

The plugin is real C++ against the CPU wheel: libtorch_cpu exports what it needs (torch's
``PrivateUse1ProfilerRegistry`` and Kineto's ``GenericTraceActivity``), Kineto's headers ship
in ``torch/include/kineto``. Only fmt is not exported, so the chip's events carry no extra
``args`` beyond the "External id" Kineto writes.
"""
from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
from dataclasses import dataclass, field

import torch

from . import ledger, runtime
from .clock import Profile
from .ledger import StreamKey


@dataclass
class LaunchTimeline(Profile):
    """A profile on the profiler's clock: microseconds since ``origin_ns``, and no op starts
    before the host launched it. ``stamps`` pairs each op of ``timeline`` with the launching
    CPU op's correlation id and the launch time (ns)."""

    origin_ns: int = 0
    stamps: list[tuple[int, int]] = field(default_factory=list, repr=False)

    def schedule(self, name: str, stream: StreamKey, engine: str | None, time_us: float) -> float:
        correlation, launch_ns = runtime.launch_stamp()
        self.wait_until(stream, (launch_ns - self.origin_ns) / 1000.0)
        self.stamps.append((correlation, launch_ns))
        return super().schedule(name, stream, engine, time_us)

    def activities(self) -> list[tuple]:
        """The ops as the C++ session takes them: ``(name, is_copy, device, stream, start_ns,
        duration_ns, launch_ns, correlation_id)``."""
        return [(e.name, e.engine == "copy", e.device, e.stream, self.origin_ns + round(e.start_us * 1000),
                 round(e.duration_us * 1000), launch_ns, correlation)
                for e, (correlation, launch_ns) in zip(self.timeline, self.stamps)]


# The timeline of the trace recording now, and what keeps it open in the ledger.
_recording: list[tuple[LaunchTimeline, contextlib.ExitStack]] = []


def _start(origin_ns: int) -> None:
    timeline, opened = LaunchTimeline(origin_ns=origin_ns), contextlib.ExitStack()
    opened.enter_context(ledger.opened(timeline))
    _recording.append((timeline, opened))


def _stop() -> list[tuple]:
    if not _recording:
        return []
    timeline, opened = _recording.pop()
    opened.close()
    return timeline.activities()


def require() -> None:
    """Raise unless ``torch.profiler`` can show the chip's activity (torch was built with Kineto)."""
    if not torch.autograd.kineto_available():
        raise RuntimeError("torch.profiler cannot show toychip's device activity: this torch was built "
                           "without Kineto (torch.autograd.kineto_available() is False). "
                           "toychip.profile() still measures the chip.")


def register() -> None:
    """Hand the C++ activity profiler its Python half (once Kineto is there to call it)."""
    if torch.autograd.kineto_available():
        runtime.set_profiler_hooks(_start, _stop)


# What torch's own Kineto prints on file descriptor 2 as every trace starts and stops,
# whatever KINETO_LOG_LEVEL says.
_KINETO_LOG_LINE = re.compile(r"USDT:.*SyncActivityProfilerHandler\.cpp:\d+\] profiler_(start|stop)\s*$")


@contextlib.contextmanager
def without_kineto_log_lines():
    """Drop Kineto's "USDT: ... profiler_start" / "profiler_stop" lines; whatever else is written
    to file descriptor 2 inside the block is written to ``sys.stderr`` when it ends."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as captured:
        os.dup2(captured.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            captured.seek(0)
            lines = captured.read().decode(errors="replace").splitlines(keepends=True)
            sys.stderr.write("".join(line for line in lines if not _KINETO_LOG_LINE.match(line)))
