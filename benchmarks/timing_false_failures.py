"""How often would a correct solution fail chapter 01's wall-clock speed check, and does a
slow one still fail? Runs the trusted-side check (``grader.authoring.timing``) with the exercise's
own goal, workload and timing protocol N times while other processes burn CPU, and prints
both ratio distributions and the margin: the reference's worst ratio must stay at most half
the threshold, and the slow variant's best ratio above it.

    python benchmarks/timing_false_failures.py --runs 200 --slow-runs 40 --load 2

The slow variant is ~20x slower than eager, so timing it costs most of a run; ``--slow-runs``
measures it on that many evenly spaced runs only.

Exercise 01.compile_friendly: the learner's single graph, compiled by Inductor on the
trusted side, must run in at most ``SPEED.max_ratio`` of the time of the eager original
(``adaptive_clip``, which breaks the graph on ``.item()``). "Correct" is the reference
solution; "slow" is the plausible wrong answer that adds a needless sort.
"""
from __future__ import annotations

import argparse
import multiprocessing
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "helpers"))

from answers_ch01 import adaptive_clip_sorted  # noqa: E402

from benchmarking import describe_hardware  # noqa: E402
from course_models.ch01_models import adaptive_clip  # noqa: E402
from grader.chapters.ch01_compile import SPEED, SPEED_NUMEL  # noqa: E402
from grader.authoring.timing import measure_ratio  # noqa: E402
from solutions.ch01_compile import adaptive_clip_fast  # noqa: E402


def burn(stop_at: float) -> None:
    while time.time() < stop_at:
        sum(i * i for i in range(10_000))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--slow-runs", type=int, help="runs that also time the slow variant (default: all)")
    parser.add_argument("--load", type=int, default=2, help="CPU-burning processes")
    args = parser.parse_args()
    slow_every = max(1, args.runs // (args.slow_runs or args.runs))
    x = torch.randn(SPEED_NUMEL, generator=torch.Generator().manual_seed(0)) * 2
    correct, slow = torch.compile(adaptive_clip_fast), torch.compile(adaptive_clip_sorted)
    with torch.no_grad():
        correct(x), slow(x)  # compile before the clock starts
        loaders = [multiprocessing.Process(target=burn, args=(time.time() + 3600,), daemon=True)
                   for _ in range(args.load)]
        for process in loaders:
            process.start()
        try:
            ratios = {"correct": [], "slow": []}
            for run in range(args.runs):
                timed = (("correct", correct), ("slow", slow)) if run % slow_every == 0 else (("correct", correct),)
                for name, candidate in timed:
                    ratios[name].append(measure_ratio(candidate, adaptive_clip, (x,),
                                                      repeats=SPEED.repeats, number=SPEED.number))
                print(f"run {run + 1}: " + "  ".join(f"{name} {ratios[name][-1]:.3f}" for name, _ in timed), flush=True)
        finally:
            for process in loaders:
                process.terminate()
    limit = SPEED.max_ratio
    print(f"hardware: {describe_hardware()} (checks time on 1 thread); concurrent CPU-burning processes: {args.load}")
    print(f"goal: compiled graph / eager adaptive_clip <= {limit} on {SPEED_NUMEL:,} floats; ratio of the fastest of "
          f"{SPEED.repeats} interleaved samples x {SPEED.number} calls")
    for name, label in (("correct", "correct (reference)"), ("slow", "slow (needless sort)")):
        print(f"{label:22} {len(ratios[name])} runs: {distribution(ratios[name])}")
    worst, best_slow = max(ratios["correct"]), min(ratios["slow"])
    print(f"false failures {sum(r > limit for r in ratios['correct'])}/{len(ratios['correct'])}; "
          f"wrongly accepted {sum(r <= limit for r in ratios['slow'])}/{len(ratios['slow'])}")
    print(f"margin: reference worst {worst:.3f} {'<=' if worst <= limit / 2 else '>'} half the threshold "
          f"({limit / 2:.3f}); slow best {best_slow:.3f} {'>' if best_slow > limit else '<='} threshold ({limit})")


def distribution(values: list[float]) -> str:
    """Min, quartiles and max of a list of ratios."""
    q1, q2, q3 = statistics.quantiles(values, n=4)
    return f"min {min(values):.3f}  q1 {q1:.3f}  median {q2:.3f}  q3 {q3:.3f}  max {max(values):.3f}"


if __name__ == "__main__":
    main()
