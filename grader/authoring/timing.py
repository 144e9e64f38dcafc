"""Speed checks that do not lie: measured on the trusted side, interleaved against the
reference in one process, on the thread's CPU clock, judged with a margin of at least 2×
between the reference's worst ratio under load and the threshold.

Only callables the trusted side built itself are timed here (the reference, and graphs
rebuilt from a learner's serialised artifact) — never learner code, which could stop
the clock. Where an exercise allows it, prefer the toy chip's simulated clock or counts
(kernel launches, graph breaks) instead.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Callable

from benchmarking import one_torch_thread

from .exercise import PASS, Verdict


def measure_ratio(candidate: Callable, baseline: Callable, args: tuple, *, repeats: int = 15,
                  budget_s: float = 2.0) -> float:
    """Fastest call of ``candidate`` over ``baseline``'s (< 1: faster), the two alternating,
    both on one thread and timed by that thread's CPU clock (``time.thread_time_ns``).

    Load on a shared machine only ever adds time, so each callable's fastest call is the
    best estimate of its own cost. The wall clock still lies under load: a long call is
    almost never left alone for a whole scheduler slice while a short one often is, so
    the fastest wall-clock calls of the two are inflated by different, random amounts (a
    rewrite exactly as fast as eager measured 0.61 to 2.05 of it); the thread's CPU clock
    does not count time spent waiting for a core (benchmarks/timing_false_failures.md).
    One thread: on a busy machine a parallel kernel waits at its barrier for its slowest
    thread. A candidate that has used ``budget_s`` of CPU time is judged on the calls it
    has made (at least 3): only one far slower than the baseline does.
    """
    fastest, spent = [math.inf, math.inf], [0, 0]
    with one_torch_thread():
        candidate(*args), baseline(*args)  # warm-up
        for call in range(repeats):
            for index, function in enumerate((candidate, baseline)):
                start = time.thread_time_ns()
                function(*args)
                elapsed = time.thread_time_ns() - start
                spent[index] += elapsed
                fastest[index] = min(fastest[index], elapsed)
            if call >= 2 and spent[0] > budget_s * 1e9:
                break
    return fastest[0] / max(fastest[1], 1)


@dataclass(frozen=True)
class SpeedGoal:
    """``candidate / baseline <= max_ratio``; choose ``max_ratio`` from measured noise
    (benchmarks/timing_false_failures.py) so correct work never fails by chance."""

    max_ratio: float
    description: str = "速度未达标"
    repeats: int = 15

    def measure(self, candidate: Callable, baseline: Callable, args: tuple) -> float:
        """``candidate``'s time over ``baseline``'s, with this goal's protocol."""
        return measure_ratio(candidate, baseline, args, repeats=self.repeats)

    def judge(self, candidate: Callable, baseline: Callable, args: tuple) -> Verdict:
        return self.judge_ratio(self.measure(candidate, baseline, args))

    def judge_ratio(self, ratio: float) -> Verdict:
        """The verdict on a ratio measured elsewhere (the grader's analysis process)."""
        if ratio <= self.max_ratio:
            return PASS
        return Verdict(False, f"{self.description}：耗时是基准的 {ratio:.2f} 倍，要求不超过 {self.max_ratio:.2f} 倍。",
                       expected=f"≤ {self.max_ratio:.2f}×", got=f"{ratio:.2f}×")
