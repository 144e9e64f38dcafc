"""The simulated timeline as a Chrome trace: see streams, engines and overlap in a viewer.

``toychip.profile().export_chrome_trace("trace.json")`` writes the Trace Event Format
that ``torch.profiler`` writes for real devices: every op is a complete event (``"ph":
"X"``) with its start and duration in simulated microseconds, one row (``tid``) per
stream of each chip (``pid``). Open it in ``chrome://tracing`` or https://ui.perfetto.dev.
Chapter 08: reading a profile of a port, copy/compute overlap on streams.
"""
from __future__ import annotations

import json

from .spec import NAME


def chrome_trace(timeline) -> dict:
    """The events of a :class:`toychip.clock.Profile` timeline as a Trace Event Format dict."""
    events = [{"name": "thread_name", "ph": "M", "pid": f"{NAME}:{device}", "tid": stream,
               "args": {"name": "default stream" if stream == 0 else f"stream {stream}"}}
              for device, stream in sorted({(e.device, e.stream) for e in timeline})]
    events += [{"name": e.name, "cat": e.engine or "allocator", "ph": "X", "pid": f"{NAME}:{e.device}",
                "tid": e.stream, "ts": e.start_us, "dur": e.duration_us} for e in timeline]
    return {"traceEvents": events, "displayTimeUnit": "ms"}


def write_chrome_trace(timeline, path: str) -> None:
    with open(path, "w") as f:
        json.dump(chrome_trace(timeline), f)
