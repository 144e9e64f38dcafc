"""The simulated timeline as a Chrome trace: see streams, engines and overlap in a viewer.

``toychip.profile().export_chrome_trace("trace.json")`` writes the Trace Event Format
that ``torch.profiler`` writes for real devices: every op is a complete event (``"ph":
"X"``) with its start and duration in simulated microseconds, one row (``tid``) per
stream of each chip (``pid``), named "stream N" as the rows of ``torch.profiler``'s trace are
(stream 0 is the default stream). Open it in ``chrome://tracing`` or https://ui.perfetto.dev.
``torch.profiler``'s own trace shows the chip beside the CPU ops (:mod:`toychip.kineto`);
:func:`trace_rows` reads either file back as the rows a viewer draws.
Chapter 08: reading a profile of a port, copy/compute overlap on streams.
"""
from __future__ import annotations

import json
import unicodedata
from collections import defaultdict
from typing import Iterable, NamedTuple, Sequence

from .spec import NAME


def chrome_trace(timeline) -> dict:
    """The events of a :class:`toychip.clock.Profile` timeline as a Trace Event Format dict."""
    events = [{"name": "thread_name", "ph": "M", "pid": f"{NAME}:{device}", "tid": stream,
               "args": {"name": f"stream {stream}"}}
              for device, stream in sorted({(e.device, e.stream) for e in timeline})]
    events += [{"name": e.name, "cat": e.engine or "allocator", "ph": "X", "pid": f"{NAME}:{e.device}",
                "tid": e.stream, "ts": e.start_us, "dur": e.duration_us} for e in timeline]
    return {"traceEvents": events, "displayTimeUnit": "ms"}


def write_chrome_trace(timeline, path: str) -> None:
    with open(path, "w") as f:
        json.dump(chrome_trace(timeline), f)


class TraceRow(NamedTuple):
    """One row of a trace viewer and one category of the complete events on it."""

    process: str     # the process_name metadata ("toychip:0", the Python process), else the pid
    thread: str      # the thread_name metadata ("stream 1", a thread id), else the tid
    category: str    # "cpu_op", "kernel", "gpu_memcpy", "privateuse1_runtime", ...
    events: int
    total_us: float  # their durations added up
    linked: int      # how many name a CPU op ("External id"), as a device kernel's launcher


class _Trace:
    """A trace file's events, and the names its metadata gives processes and threads."""

    def __init__(self, path: str):
        with open(path) as f:
            self.events = json.load(f)["traceEvents"]
        self.processes = {e["pid"]: e["args"]["name"] for e in self.events if e.get("name") == "process_name"}
        self.threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in self.events if e.get("name") == "thread_name"}

    def row(self, event: dict) -> tuple[str, str]:
        pid, tid = event["pid"], event["tid"]
        return str(self.processes.get(pid, pid)), str(self.threads.get((pid, tid), tid))

    def complete(self, *categories: str) -> list[dict]:
        """The complete ("X") events, of ``categories`` if given."""
        return [e for e in self.events if e.get("ph") == "X" and (not categories or e.get("cat") in categories)]


def trace_rows(path: str) -> list[TraceRow]:
    """A Chrome trace file's complete events grouped by row and category, in file order."""
    trace = _Trace(path)
    rows: dict[tuple, list] = defaultdict(lambda: [0, 0.0, 0])
    for e in trace.complete():
        row = rows[(*trace.row(e), e.get("cat", ""))]
        row[0] += 1
        row[1] += e.get("dur", 0.0)
        row[2] += "External id" in e.get("args", {})
    return [TraceRow(*key, count, total, linked) for key, (count, total, linked) in rows.items()]


class DeviceOp(NamedTuple):
    """A device kernel or copy in a ``torch.profiler`` trace, and the CPU op that launched it."""

    name: str
    process: str         # its chip ("toychip:0")
    thread: str          # its stream ("stream 0")
    cpu_op: str          # the CPU op with its "External id" ("" if none)
    queued_us: float     # from the launch (the flow arrow's start) to the op's start
    duration_us: float


def device_ops(path: str) -> list[DeviceOp]:
    """The device kernels and copies of a ``torch.profiler`` trace file, in file order."""
    trace = _Trace(path)
    cpu_ops = {e["args"]["External id"]: e["name"]
               for e in trace.complete("cpu_op") if "External id" in e.get("args", {})}
    flows = [e for e in trace.events if e.get("cat") == "ac2g"]
    launched = {e["id"]: e["ts"] for e in flows if e["ph"] == "s"}
    # a flow's end binds to the slice that starts where it is, on its row (as viewers bind it)
    ends = {(e["pid"], e["tid"], e["ts"]): e["id"] for e in flows if e["ph"] == "f"}
    ops = []
    for e in trace.complete("kernel", "gpu_memcpy"):
        flow = ends.get((e["pid"], e["tid"], e["ts"]))
        queued = e["ts"] - launched[flow] if flow in launched else 0.0
        ops.append(DeviceOp(e["name"], *trace.row(e), cpu_ops.get(e.get("args", {}).get("External id"), ""),
                            queued, e["dur"]))
    return ops


def display_width(text: str) -> int:
    """Columns ``text`` takes in a terminal or notebook: East Asian wide characters take two."""
    return sum(2 if unicodedata.east_asian_width(char) in ("W", "F") else 1 for char in text)


def text_table(header: Sequence[str], rows: Iterable[Sequence]) -> str:
    """``rows`` under ``header`` in aligned columns, padded by display width so that Chinese
    headings line up; numbers right-aligned, floats with three decimals (nanoseconds in us)."""
    rows = [list(row) for row in rows]
    right = [all(isinstance(row[i], (int, float)) for row in rows) for i in range(len(header))]
    lines = [list(header)] + [[f"{v:.3f}" if isinstance(v, float) else str(v) for v in row] for row in rows]
    widths = [max(display_width(line[i]) for line in lines) for i in range(len(header))]

    def padded(text: str, i: int) -> str:
        pad = " " * (widths[i] - display_width(text))
        return pad + text if right[i] else text + pad

    return "\n".join("  ".join(padded(text, i) for i, text in enumerate(line)).rstrip() for line in lines)
