"""What compiling costs and when it pays back: the first call against the steady state.

    from benchmarking.compile_timing import compile_timing
    timing = compile_timing(torch.compile(f), f, x)
    print(timing.table())          # first call, steady state, eager, break-even calls

The first call of a compiled function traces, compiles and loads code (seconds); later
calls only check guards and run the compiled code. Compiling is worth it after
``break_even_calls`` calls, if the compiled steady state is faster than eager at all.
"""
from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

from .measure import _synchronizer, compare


@dataclass
class CompileTiming:
    """Seconds per call: the compiled function's first call, its steady state, and eager."""

    first_call_s: float
    steady_s: float
    eager_s: float
    hardware: str

    @property
    def overhead_s(self) -> float:
        """What the first call costs beyond an ordinary compiled call (tracing, compiling)."""
        return self.first_call_s - self.steady_s

    @property
    def speedup(self) -> float:
        """Eager time over compiled steady-state time (> 1: compiled is faster)."""
        return self.eager_s / self.steady_s

    @property
    def break_even_calls(self) -> float:
        """Calls after which compiling has paid for itself; ``inf`` if it never does."""
        saving = self.eager_s - self.steady_s
        return self.overhead_s / saving if saving > 0 else math.inf

    def table(self) -> str:
        calls = "永不（编译后更慢）" if math.isinf(self.break_even_calls) else f"{self.break_even_calls:,.0f} 次调用"
        return "\n".join([
            f"首次调用 (first call)      {self.first_call_s * 1e3:12.1f} ms",
            f"稳定状态 (steady, compiled){self.steady_s * 1e6:12.1f} µs",
            f"即时执行 (eager)           {self.eager_s * 1e6:12.1f} µs",
            f"加速比 eager/compiled      {self.speedup:12.2f}×",
            f"回本 (break-even)          {calls}",
            f"({self.hardware})",
        ])

    def __str__(self) -> str:
        return self.table()


def time_first_call(fn: Callable, *args, device: str = "cpu") -> float:
    """Seconds taken by one call of ``fn``: call it before anything else has warmed it up."""
    sync = _synchronizer(device)
    sync()
    start = time.perf_counter()
    fn(*args)
    sync()
    return time.perf_counter() - start


def compile_timing(compiled: Callable, eager: Callable, *args, repeats: int = 21, number: int = 1,
                   device: str = "cpu") -> CompileTiming:
    """Time ``compiled``'s first call, then both functions interleaved (see :func:`compare`)."""
    first = time_first_call(compiled, *args, device=device)
    result = compare({"compiled": compiled, "eager": eager}, *args, warmup=2, repeats=repeats,
                     number=number, device=device)
    return CompileTiming(first, result["compiled"].median, result["eager"].median, result.hardware)
