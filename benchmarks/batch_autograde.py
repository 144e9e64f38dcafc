"""Class-scale batch grading: N submissions per chapter through the isolated harness.

    python benchmarks/batch_autograde.py --students 40 --jobs 2 [--chapters 00 03]

For each chapter: builds a throw-away course (``python -m grader release``), fills the
released notebook for each student (most correct, every 4th with a wrong answer, every
10th handed in untouched, every 20th with an answer that never returns), runs
``python -m grader autograde`` once (isolated grading, nbgrader autograde, feedback,
export) and once more (every record reused), and prints one row per chapter: wall
times and per-submission latency. Goals: median <= 15 s, 40 submissions <= 10 min.
Recorded rows, with the machine and conditions: benchmarks/batch_autograde.md.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "helpers"))

from notebook_builders import NOTEBOOKS, write_answers_only, write_filled, wrong_answer_source  # noqa: E402
from answers import WRONG_ANSWERS  # noqa: E402

from benchmarking import describe_hardware  # noqa: E402
from grader import chapters  # noqa: E402
from grader.instructor.course import autograde_course, build_course  # noqa: E402


def never_returns(function: str) -> str:
    return f"def {function}(*args, **kwargs):\n    while True:\n        pass\n"


def fill(course: Path, assignment: str, release: Path, students: int) -> None:
    """Write each student's submission under ``submitted/``."""
    exercises = list(chapters.chapter(assignment[2:]))
    wrong = [(answer.exercise_id, answer.function) for answer in WRONG_ANSWERS
             if answer.exercise_id.startswith(assignment[2:] + ".")]
    for index in range(students):
        target = course / "submitted" / f"student{index:03d}" / assignment / release.name
        target.parent.mkdir(parents=True)
        if index % 10 == 9:
            target.write_bytes(release.read_bytes())  # handed in untouched
        elif index % 20 == 7:
            hanging = exercises[index % len(exercises)]
            write_answers_only(target, {hanging.id: never_returns(hanging.function)}, notebook_path=release)
        elif index % 4 == 3:
            identifier, function = wrong[index % len(wrong)]
            override = wrong_answer_source(function, chapters.get(identifier).function)
            write_filled(target, notebook_path=release, overrides={identifier: override})
        else:
            write_filled(target, notebook_path=release)


def grade_chapter(notebook: Path, students: int, jobs: int) -> dict:
    assignment = "ch" + notebook.name[:2]
    with tempfile.TemporaryDirectory(prefix="batch-bench-") as scratch:
        course = Path(scratch) / "course"
        build_course(course, [notebook])
        fill(course, assignment, course / "release" / assignment / notebook.name, students)
        start = time.monotonic()
        statuses = autograde_course(course, jobs=jobs)
        first = time.monotonic() - start
        start = time.monotonic()
        again = autograde_course(course, jobs=jobs)
        second = time.monotonic() - start
    latencies = sorted(s.seconds for s in statuses)
    return {"chapter": notebook.name[:2], "first": first, "second": second,
            "reused": sum(s.reused for s in again), "median": statistics.median(latencies),
            "p90": latencies[int(0.9 * (len(latencies) - 1))], "max": latencies[-1],
            "points": sorted({round(s.points, 2) for s in statuses})}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--students", type=int, default=40)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--chapters", nargs="*", default=list(chapters.chapter_modules()))
    args = parser.parse_args()
    print(f"hardware: {describe_hardware()}; jobs: {args.jobs}; {args.students} submissions per chapter")
    print("| chapter | first run (s) | re-run (s) | median (s) | p90 (s) | max (s) | points seen |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for number in args.chapters:
        row = grade_chapter(next(NOTEBOOKS.glob(f"{number}_*.ipynb")), args.students, args.jobs)
        print(f"| {row['chapter']} | {row['first']:.0f} | {row['second']:.0f} ({row['reused']} reused) | "
              f"{row['median']:.1f} | {row['p90']:.1f} | {row['max']:.1f} | {row['points']} |", flush=True)


if __name__ == "__main__":
    main()
