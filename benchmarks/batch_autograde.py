"""Class-scale batch grading: N submissions of chapter 03 on this machine.

    python benchmarks/batch_autograde.py --students 40 --jobs 2

Builds a throw-away course (``python -m grader release``), fills the released notebook
for each student (most correct, some with a wrong answer, some untouched), runs
``python -m grader autograde`` once cold and once more (every record reused), and
prints wall times and per-submission latency.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "helpers"))

from notebook_builders import write_filled, wrong_answer_source  # noqa: E402
from wrong_ch03 import WRONG_ANSWERS  # noqa: E402

from benchmarking import describe_hardware  # noqa: E402
from grader.course import autograde_course, build_course  # noqa: E402


def fill(course: Path, students: int) -> None:
    release = course / "release" / "ch03" / "03_fx.ipynb"
    for index in range(students):
        target = course / "submitted" / f"student{index:03d}" / "ch03" / "03_fx.ipynb"
        target.parent.mkdir(parents=True)
        if index % 10 == 9:
            target.write_bytes(release.read_bytes())  # handed in untouched
            continue
        overrides = None
        if index % 4 == 3:
            exercise, wrong = WRONG_ANSWERS[index % len(WRONG_ANSWERS)]
            name = {"03.op_census": "count_ops", "03.relu_to_gelu": "relu_to_gelu",
                    "03.remove_dropout": "remove_dropout", "03.fold_conv_bn": "fold_conv_bn",
                    "03.fusion_groups": "find_fusion_groups"}[exercise]
            overrides = {exercise: wrong_answer_source(wrong, name)}
        write_filled(target, notebook_path=release, overrides=overrides)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--students", type=int, default=40)
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="batch-bench-") as scratch:
        course = Path(scratch) / "course"
        build_course(course, [Path(__file__).resolve().parents[1] / "notebooks" / "03_fx.ipynb"])
        fill(course, args.students)
        start = time.monotonic()
        statuses = autograde_course(course, jobs=args.jobs)
        first = time.monotonic() - start
        start = time.monotonic()
        again = autograde_course(course, jobs=args.jobs)
        second = time.monotonic() - start
    latencies = sorted(s.seconds for s in statuses)
    print(f"hardware: {describe_hardware()}; jobs: {args.jobs}")
    print(f"{args.students} submissions of chapter 03: first run {first:.0f} s "
          f"(isolated grading + nbgrader autograde + feedback + export), re-run {second:.0f} s "
          f"({sum(s.reused for s in again)} records reused)")
    print(f"per-submission latency: median {statistics.median(latencies):.1f} s, "
          f"p90 {latencies[int(0.9 * (len(latencies) - 1))]:.1f} s, max {latencies[-1]:.1f} s")
    print(f"points: {sorted({s.points for s in statuses})}; statuses: "
          f"{sorted({s.status for s in statuses})}")


if __name__ == "__main__":
    main()
