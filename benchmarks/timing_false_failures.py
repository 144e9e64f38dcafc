"""How often would a correct solution fail chapter 01's speed check, and does a rewrite that
is no faster than eager still fail? Runs the trusted-side check of exercise
01.compile_friendly (``grader.chapters.ch01_compile``: the learner's graph captured,
rebuilt, compiled by Inductor, timed against eager ``adaptive_clip`` with the exercise's
own workload and protocol) N times while other processes burn CPU, and prints each
candidate's ratio distribution and the margin. The threshold must leave the reference's
worst ratio at most half of it, and every slow candidate's best ratio above it.

Each run measures every candidate with the check's protocol (``SPEED.measure``: fastest
interleaved calls on the thread's CPU clock, ``grader.authoring.timing``); ``--wall-runs``
evenly spaced runs also measure the reference and "as eager" the same way on the wall
clock (``wall_clock_ratio``, here only), for comparison.

    nice -n 5 python benchmarks/timing_false_failures.py --runs 200 --slow-runs 4 --wall-runs 20 --load 2

Candidates:

- ``reference``: the reference solution (one fused kernel);
- ``as eager``: eager ``adaptive_clip`` timed against itself, i.e. a rewrite that saved
  nothing: the ratio a candidate exactly as fast as eager measures under load;
- ``needless sort``: the plausible wrong answer that sorts ``|x|`` before the mean ("more
  accurate"): one graph and correct, but the sort falls back to ATen. It is ~50x slower
  than eager, so ``--slow-runs`` times it on that many evenly spaced runs only, and only
  with the check's clock.

Record a run in ``benchmarks/timing_false_failures.md`` and the chosen numbers in the
comment above ``SPEED`` in ``grader/chapters/ch01_compile.py``.
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
from grader.chapters.ch01_compile import SPEED, SPEED_NUMEL, capture_artifact, compiled_graph  # noqa: E402
from solutions.ch01_compile import adaptive_clip_fast  # noqa: E402


def burn(stop_at: float) -> None:
    while time.time() < stop_at:
        sum(i * i for i in range(10_000))


def wall_clock_ratio(candidate, baseline, args: tuple) -> float:
    """The check's protocol on the wall clock instead of the thread's CPU clock."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    fastest = [float("inf"), float("inf")]
    try:
        candidate(*args), baseline(*args)
        for _ in range(SPEED.repeats):
            for index, function in enumerate((candidate, baseline)):
                start = time.perf_counter()
                function(*args)
                fastest[index] = min(fastest[index], time.perf_counter() - start)
    finally:
        torch.set_num_threads(threads)
    return fastest[0] / fastest[1]


def trusted_side_compilation(function, x: torch.Tensor):
    """What the grader times for a learner's ``function``: its one captured graph, rebuilt and
    compiled by Inductor."""
    compiled, kernels = compiled_graph(capture_artifact(function, {"example": x}), x)
    print(f"{function.__name__}: Inductor launches {kernels}")
    return compiled


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--slow-runs", type=int, help="runs that also time the needless sort (default: all)")
    parser.add_argument("--wall-runs", type=int, help="runs that also time with the wall clock (default: all)")
    parser.add_argument("--load", type=int, default=2, help="CPU-burning processes")
    args = parser.parse_args()
    slow_every = max(1, args.runs // (args.slow_runs or args.runs))
    wall_every = max(1, args.runs // (args.wall_runs or args.runs))
    x = torch.randn(SPEED_NUMEL, generator=torch.Generator().manual_seed(0)) * 2
    candidates = {"reference": trusted_side_compilation(adaptive_clip_fast, x), "as eager": adaptive_clip,
                  "needless sort": trusted_side_compilation(adaptive_clip_sorted, x)}
    ratios = {clock: {name: [] for name in candidates} for clock in ("thread CPU time", "wall clock")}
    loaders = [multiprocessing.Process(target=burn, args=(time.time() + 3 * 3600,), daemon=True)
               for _ in range(args.load)]
    for process in loaders:
        process.start()
    try:
        with torch.no_grad():
            for run in range(args.runs):
                timed = [name for name in candidates if name != "needless sort" or run % slow_every == 0]
                walled = [name for name in timed if name != "needless sort" and run % wall_every == 0]
                for name in timed:
                    ratios["thread CPU time"][name].append(SPEED.measure(candidates[name], adaptive_clip, (x,)))
                for name in walled:
                    ratios["wall clock"][name].append(wall_clock_ratio(candidates[name], adaptive_clip, (x,)))
                cpu, wall = ratios["thread CPU time"], ratios["wall clock"]
                print(f"run {run + 1}: " + "  ".join(f"{name} {cpu[name][-1]:.3f}" for name in timed)
                      + "".join(f"  (wall: {name} {wall[name][-1]:.3f})" for name in walled), flush=True)
    finally:
        for process in loaders:
            process.terminate()
    print(f"hardware: {describe_hardware()} (checks time on 1 thread); concurrent CPU-burning processes: {args.load}")
    print(f"goal: compiled graph / eager adaptive_clip <= {SPEED.max_ratio} on {SPEED_NUMEL:,} floats; ratio of the "
          f"fastest of {SPEED.repeats} interleaved calls")
    for clock, by_candidate in ratios.items():
        print(f"--- {clock}")
        report(by_candidate)


def report(ratios: dict[str, list[float]]) -> None:
    limit = SPEED.max_ratio
    for name, values in ratios.items():
        print(f"{name:14} {len(values):3} runs: {distribution(values) if values else 'not timed with this clock'}")
    worst = max(ratios["reference"])
    best_slow = min(min(values) for name, values in ratios.items() if name != "reference" and values)
    print(f"false failures {sum(r > limit for r in ratios['reference'])}/{len(ratios['reference'])}; wrongly accepted "
          + ", ".join(f"{name} {sum(r <= limit for r in values)}/{len(values)}"
                      for name, values in ratios.items() if name != "reference" and values))
    print(f"margin: reference worst {worst:.3f} {'<=' if worst <= limit / 2 else '>'} half the threshold "
          f"({limit / 2:.3f}); slow candidates' best {best_slow:.3f} {'>' if best_slow > limit else '<='} "
          f"threshold ({limit})")
    print(f"thresholds that keep both margins: {2 * worst:.3f} <= threshold < {best_slow:.3f}")


def distribution(values: list[float]) -> str:
    """Min, quartiles and max of a list of ratios."""
    q1, q2, q3 = statistics.quantiles(values, n=4) if len(values) > 1 else values * 3
    return f"min {min(values):.3f}  q1 {q1:.3f}  median {q2:.3f}  q3 {q3:.3f}  max {max(values):.3f}"


if __name__ == "__main__":
    main()
