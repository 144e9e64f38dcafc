"""Measurement: warm-up, then repeated timed calls; medians are reported, not means.

``compare`` interleaves the candidates (A B A B ...) inside one process so that a burst
of load on a shared machine hits all of them alike, which keeps their ratio stable.

On a CUDA device a sample is timed with CUDA events around ``number`` back-to-back calls,
after the L2 cache was flushed: a ``torch.cuda.synchronize()`` around every call would add to
every sample the time the GPU waits for the host (the call's Python work, guards and launches,
and the wake-up from the synchronize). ``assets/gpu/ch01_gpu_timings.json`` records how much
(``synchronize_every_call_us`` against the event timings of the same chain; on an H100 with
torch 2.11: +15 µs eager, +35 µs compiled, +12 µs for a copy, on calls of 181–725 µs).
"""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from typing import Callable, Mapping

import torch

from .hardware import describe_hardware


def _is_cuda(device: str) -> bool:
    return str(device).startswith("cuda") and torch.cuda.is_available()


def _synchronizer(device: str) -> Callable[[], None]:
    """Kernels on a GPU run asynchronously: wait for them before reading the clock."""
    return torch.cuda.synchronize if _is_cuda(device) else (lambda: None)


@dataclass
class Measurement:
    """Per-call times in seconds of one callable."""

    name: str
    samples: list[float]
    hardware: str

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    @property
    def iqr(self) -> float:
        """Spread of the samples: 75th minus 25th percentile."""
        if len(self.samples) < 2:
            return 0.0
        quartiles = statistics.quantiles(self.samples, n=4)
        return quartiles[2] - quartiles[0]

    def __str__(self) -> str:
        return f"{self.name}: median {self.median * 1e6:.1f} µs (IQR {self.iqr * 1e6:.1f} µs, n={len(self.samples)})"


@dataclass
class Comparison:
    """Interleaved measurements of several callables on the same inputs."""

    measurements: dict[str, Measurement]
    hardware: str
    notes: dict[str, str] = field(default_factory=dict)

    def __getitem__(self, name: str) -> Measurement:
        return self.measurements[name]

    def ratio(self, name: str, baseline: str) -> float:
        """Median time of ``name`` divided by the baseline's (< 1: ``name`` is faster)."""
        return self.measurements[name].median / self.measurements[baseline].median

    def table(self) -> str:
        width = max(len(name) for name in self.measurements)
        first = next(iter(self.measurements))
        rows = [f"{'':{width}}  median µs   IQR µs   vs {first}"]
        for name, m in self.measurements.items():
            rows.append(f"{name:{width}}  {m.median * 1e6:9.1f}  {m.iqr * 1e6:7.1f}   {self.ratio(name, first):6.2f}×")
        rows.append(f"({self.hardware})")
        return "\n".join(rows)

    def __str__(self) -> str:
        return self.table()

    def plot(self, title: str = "", ax=None):
        """Bar chart of the medians with IQR whiskers; returns the matplotlib Figure."""
        import matplotlib.pyplot as plt

        if ax is None:
            fig, ax = plt.subplots(figsize=(6, 3.2))
        else:
            fig = ax.figure
        names = list(self.measurements)
        medians = [self.measurements[n].median * 1e6 for n in names]
        spreads = [self.measurements[n].iqr * 1e6 / 2 for n in names]
        ax.bar(names, medians, yerr=spreads, capsize=4, color="#6fa8dc")
        ax.set_ylabel("median µs / call")
        ax.set_title(f"{title}\n{self.hardware}" if title else self.hardware, fontsize=9)
        fig.tight_layout()
        plt.close(fig)
        return fig


def _time_calls(fn: Callable, args: tuple, number: int, sync: Callable[[], None]) -> float:
    """Host clock around ``number`` calls (CPU: the work is done when a call returns)."""
    sync()
    start = time.perf_counter()
    for _ in range(number):
        fn(*args)
    sync()
    return (time.perf_counter() - start) / number


class _CudaTimer:
    """GPU time of ``number`` back-to-back calls, measured by CUDA events on the stream,
    each sample starting with a cold L2 cache (a write over twice its size)."""

    def __init__(self, device: str):
        properties = torch.cuda.get_device_properties(torch.device(device))
        self.flush_buffer = torch.empty(2 * max(properties.L2_cache_size, 1 << 20), dtype=torch.uint8, device=device)

    def __call__(self, fn: Callable, args: tuple, number: int) -> float:
        self.flush_buffer.zero_()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(number):
            fn(*args)
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1e3 / number


def compare(candidates: Mapping[str, Callable], *args, warmup: int = 3, repeats: int = 21,
            number: int = 1, device: str = "cpu") -> Comparison:
    """Time each candidate on ``args``: ``warmup`` untimed calls each, then ``repeats``
    rounds in which every candidate is timed once (``number`` calls per sample; on CUDA
    by events around back-to-back calls, see the module docstring)."""
    if not candidates:
        raise ValueError("compare() needs at least one callable")
    if repeats < 1 or number < 1 or warmup < 0:
        raise ValueError("repeats and number must be >= 1 and warmup >= 0")
    sync = _synchronizer(device)
    timer = _CudaTimer(device) if _is_cuda(device) else (lambda fn, a, n: _time_calls(fn, a, n, sync))
    for fn in candidates.values():
        for _ in range(warmup):
            fn(*args)
    sync()
    samples: dict[str, list[float]] = {name: [] for name in candidates}
    for _ in range(repeats):
        for name, fn in candidates.items():
            samples[name].append(timer(fn, args, number))
    hardware = describe_hardware(device)
    return Comparison({name: Measurement(name, s, hardware) for name, s in samples.items()}, hardware)


def measure(fn: Callable, *args, name: str = "fn", warmup: int = 3, repeats: int = 21,
            number: int = 1, device: str = "cpu") -> Measurement:
    """Time one callable; see :func:`compare` for the protocol."""
    return compare({name: fn}, *args, warmup=warmup, repeats=repeats, number=number,
                   device=device)[name]
