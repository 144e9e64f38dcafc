"""How often would a correct solution fail a wall-clock speed check, and does a slow one
still fail? Runs the trusted-side check (grader.timing) N times while other processes
load every CPU core, and prints the failure counts.

    python benchmarks/timing_false_failures.py --runs 50

The workload is the course's honest compile win: a memory-bound pointwise chain,
``((x.sin() + x.cos()) * 2).relu() - 0.5``. "Correct" is the Inductor-compiled chain;
"slow" is the same chain in eager mode (what a learner gets when a graph break or an
.item() call keeps Inductor from fusing). The threshold is the one chapter 01 uses.
"""
from __future__ import annotations

import argparse
import multiprocessing
import statistics
import time

import torch

from benchmarking import describe_hardware
from grader.timing import SpeedGoal, measure_ratio

THRESHOLD = 0.6


def chain(x):
    return ((x.sin() + x.cos()) * 2).relu() - 0.5


def burn(stop_at: float) -> None:
    while time.time() < stop_at:
        sum(i * i for i in range(10_000))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--numel", type=int, default=2_000_000)
    parser.add_argument("--load", type=int, default=multiprocessing.cpu_count(), help="CPU-burning processes")
    args = parser.parse_args()
    torch.set_num_threads(1)
    x = torch.randn(args.numel)
    compiled = torch.compile(chain)
    compiled(x)  # compile before the clock starts
    goal = SpeedGoal(THRESHOLD)
    loaders = [multiprocessing.Process(target=burn, args=(time.time() + 3600,), daemon=True) for _ in range(args.load)]
    for process in loaders:
        process.start()
    try:
        correct, slow = [], []
        for _ in range(args.runs):
            correct.append(measure_ratio(compiled, chain, (x,), repeats=goal.repeats, number=goal.number))
            slow.append(measure_ratio(chain, chain, (x,), repeats=goal.repeats, number=goal.number))
    finally:
        for process in loaders:
            process.terminate()
    false_failures = sum(r > THRESHOLD for r in correct)
    missed_slow = sum(r <= THRESHOLD for r in slow)
    print(f"hardware: {describe_hardware()}; concurrent CPU-burning processes: {args.load}")
    print(f"threshold: candidate/eager <= {THRESHOLD}; {args.runs} runs each; {args.numel:,} floats")
    print(f"correct (compiled): ratio median {statistics.median(correct):.3f}, max {max(correct):.3f}; "
          f"false failures {false_failures}/{args.runs}")
    print(f"slow (eager):       ratio median {statistics.median(slow):.3f}, min {min(slow):.3f}; "
          f"wrongly accepted {missed_slow}/{args.runs}")


if __name__ == "__main__":
    main()
