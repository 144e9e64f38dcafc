"""What compiling costs and when it pays back: the first call against the steady state.

    from benchmarking.compile_timing import compile_timing
    timing = compile_timing(torch.compile(f), f, x)
    print(timing.table())          # first call, steady state, eager, break-even calls

The first call of a compiled function traces, compiles and loads code (seconds); later
calls only check guards and run the compiled code. Compiling is worth it after
``break_even_calls`` calls, if the compiled steady state is faster than eager at all.
``cold_and_warm_first_call`` measures that first call in fresh processes, once with an empty
on-disk cache and once with the cache the first process left behind.
"""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass

from .hardware import describe_hardware
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


@dataclass
class CacheTiming:
    """Seconds of a first compiled call in a fresh process: empty Inductor cache, then warm."""

    cold_s: float
    warm_s: float
    hardware: str

    def table(self) -> str:
        return (f"冷缓存 (cold cache) 首次调用 {self.cold_s:6.1f} s\n"
                f"热缓存 (warm cache) 首次调用 {self.warm_s:6.1f} s\n({self.hardware})")

    def __str__(self) -> str:
        return self.table()


_FIRST_CALL_SCRIPT = """
import importlib, json, sys, time
module, factory, kwargs = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
step = getattr(importlib.import_module(module), factory)(**kwargs)
start = time.perf_counter()
step()
print(time.perf_counter() - start)
"""


def first_call_in_fresh_process(module: str, factory: str, cache_dir: str, **kwargs) -> float:
    """Seconds of one call of ``module.factory(**kwargs)()`` (a step that compiles on its first
    call) in a new Python process whose Inductor cache is ``cache_dir``; imports are not counted."""
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": cache_dir}
    done = subprocess.run([sys.executable, "-c", _FIRST_CALL_SCRIPT, module, factory, json.dumps(kwargs)],
                          env=env, capture_output=True, text=True, check=True)
    return float(done.stdout.strip().splitlines()[-1])


def cold_and_warm_first_call(module: str, factory: str, *, measured_on: str = "cpu", **kwargs) -> CacheTiming:
    """The first call with an empty on-disk cache, then again in another process that finds it
    filled; ``measured_on`` names the device for the hardware label, ``kwargs`` go to the factory."""
    with tempfile.TemporaryDirectory(prefix="inductor-cache-") as cache_dir:
        cold = first_call_in_fresh_process(module, factory, cache_dir, **kwargs)
        warm = first_call_in_fresh_process(module, factory, cache_dir, **kwargs)
    return CacheTiming(cold, warm, describe_hardware(measured_on))
