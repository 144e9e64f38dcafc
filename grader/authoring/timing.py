"""Wall-clock speed checks that do not lie: measured on the trusted side, interleaved
against the reference in one process, medians over repeats, judged with a margin.

Only callables the trusted side built itself are timed here (the reference, and graphs
rebuilt from a learner's serialised artifact) — never learner code, which could stop
the clock. Where an exercise allows it, prefer the toy chip's simulated clock instead.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from benchmarking import compare

from .exercise import PASS, Verdict


def measure_ratio(candidate: Callable, baseline: Callable, args: tuple, *, warmup: int = 3,
                  repeats: int = 15, number: int = 5) -> float:
    """Median per-call time of ``candidate`` divided by ``baseline``'s (< 1: faster).

    The two alternate call by call, so a burst of load from another process slows both.
    Both run on one thread: on a busy machine a parallel kernel waits at its barrier for
    its slowest thread, which would punish the candidate for someone else's load.
    """
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        result = compare({"candidate": candidate, "baseline": baseline}, *args, warmup=warmup,
                         repeats=repeats, number=number)
    finally:
        torch.set_num_threads(threads)
    return result.ratio("candidate", "baseline")


@dataclass(frozen=True)
class SpeedGoal:
    """``candidate / baseline <= max_ratio``; choose ``max_ratio`` from measured noise
    (benchmarks/timing_false_failures.py) so correct work never fails by chance."""

    max_ratio: float
    description: str = "速度未达标"
    repeats: int = 15
    number: int = 5

    def judge(self, candidate: Callable, baseline: Callable, args: tuple) -> Verdict:
        ratio = measure_ratio(candidate, baseline, args, repeats=self.repeats, number=self.number)
        if ratio <= self.max_ratio:
            return PASS
        return Verdict(False, f"{self.description}：耗时是基准的 {ratio:.2f} 倍，要求不超过 {self.max_ratio:.2f} 倍。",
                       expected=f"≤ {self.max_ratio:.2f}×", got=f"{ratio:.2f}×")
