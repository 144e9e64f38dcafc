"""Wall-clock speed checks that do not lie: measured on the trusted side, interleaved
against the reference in one process, the fastest of many samples each, judged with a
margin of at least 2× between the reference's worst ratio under load and the threshold.

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
    """Fastest per-call sample of ``candidate`` divided by ``baseline``'s (< 1: faster).

    The two alternate sample by sample, so a burst of load from another process hits
    both. Load on a shared machine only ever *adds* time, so each callable's fastest
    sample is the best estimate of its own cost: the ratio of minima stayed within a few
    per cent under two CPU-burning processes, where the ratio of medians drifted up to
    the threshold (benchmarks/timing_false_failures.py). Both run on one thread: on a
    busy machine a parallel kernel waits at its barrier for its slowest thread, which
    would punish the candidate for someone else's load.
    """
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        result = compare({"candidate": candidate, "baseline": baseline}, *args, warmup=warmup,
                         repeats=repeats, number=number)
    finally:
        torch.set_num_threads(threads)
    return min(result["candidate"].samples) / min(result["baseline"].samples)


@dataclass(frozen=True)
class SpeedGoal:
    """``candidate / baseline <= max_ratio``; choose ``max_ratio`` from measured noise
    (benchmarks/timing_false_failures.py) so correct work never fails by chance."""

    max_ratio: float
    description: str = "速度未达标"
    repeats: int = 15
    number: int = 5

    def measure(self, candidate: Callable, baseline: Callable, args: tuple) -> float:
        """``candidate``'s time over ``baseline``'s, with this goal's protocol."""
        return measure_ratio(candidate, baseline, args, repeats=self.repeats, number=self.number)

    def judge(self, candidate: Callable, baseline: Callable, args: tuple) -> Verdict:
        return self.judge_ratio(self.measure(candidate, baseline, args))

    def judge_ratio(self, ratio: float) -> Verdict:
        """The verdict on a ratio measured elsewhere (the grader's analysis process)."""
        if ratio <= self.max_ratio:
            return PASS
        return Verdict(False, f"{self.description}：耗时是基准的 {ratio:.2f} 倍，要求不超过 {self.max_ratio:.2f} 倍。",
                       expected=f"≤ {self.max_ratio:.2f}×", got=f"{ratio:.2f}×")
