"""``python -m grader``: check, grade, release, autograde, Gradescope bundles and lint from the command line.

The instructor's commands import their (nbgrader-heavy) modules only when they run."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .errors import GraderError
from .grading import feedback
from .grading.harness import SOLUTIONS_DIR, grade_file, grade_notebook, graded_exercises
from .grading.notebooks import read_notebook
from .grading.results import ExerciseResult
from .sandbox.confinement import Limits


def _table(results: list[ExerciseResult]) -> str:
    """The instructor's view of a graded submission: one row per exercise, with the reason the
    learner's feedback gives."""
    width = max(len(r.exercise_id) for r in results)
    rows = [f"{'exercise':{width}}  {'points':>9}  {'status':10}  reason"]
    for r in results:
        rows.append(f"{r.exercise_id:{width}}  {r.points:>4g}/{r.max_points:<4g}  {feedback.status(r):10}  "
                    f"{feedback.reason(r)}")
    total, best = sum(r.points for r in results), sum(r.max_points for r in results)
    rows.append(f"{'total':{width}}  {total:>4g}/{best:<4g}")
    return "\n".join(rows)


def _limits(args) -> Limits:
    return Limits(cell_timeout_s=args.cell_timeout, task_timeout_s=args.case_timeout,
                  protected_paths=(str(SOLUTIONS_DIR),))


def cmd_check(args) -> int:
    """The notebook's check cells, from a terminal: the same public cases, the same words."""
    try:
        notebook = read_notebook(args.notebook)
    except GraderError as error:
        print(feedback.cannot_check(error), file=sys.stderr)
        return 2
    exercises = {e.id: e for e in graded_exercises(notebook, Path(args.notebook).name)}
    print(feedback.checking(len(exercises)), file=sys.stderr, flush=True)
    submission = grade_notebook(notebook, seed=0, name=Path(args.notebook).name, limits=_limits(args),
                                include_hidden=False)
    for result in submission.exercises:
        print(feedback.format_result(result, exercises[result.exercise_id], show_hint=False))
    for note in submission.notes:
        print(feedback.note(note))
    print(feedback.public_total(submission.points, submission.max_points))
    return 0 if all(r.passed for r in submission.exercises) else 1


def cmd_grade(args) -> int:
    from .instructor.reports import write_gradescope, write_junit

    exercises = graded_exercises(read_notebook(args.submission), Path(args.submission).name)  # bad input: one line
    print(f"grading {len(exercises)} exercises of {args.submission} in a sandbox (public and hidden cases)...",
          file=sys.stderr, flush=True)
    submission = grade_file(args.submission, seed=args.seed, limits=_limits(args), exercises=exercises)
    results = submission.exercises
    report = {"submission": str(args.submission), **submission.to_json()}
    text = json.dumps(report, ensure_ascii=False, indent=2)
    if args.json:
        Path(args.json).write_text(text + "\n", encoding="utf-8")
    record = {"student": Path(args.submission).stem, "assignment": "submission", "status": "graded", **report}
    if args.junit:
        write_junit([record], args.junit)
    if args.gradescope:
        write_gradescope(record, args.gradescope)
    print(_table(results))
    print(f"isolation: {submission.isolation}")
    return 0


def cmd_release(args) -> int:
    from .instructor.course import build_course, select_notebooks
    from .instructor.warm_cache import cache_size, inductor_cache

    notebooks = select_notebooks(args.assignment) if args.assignment else None
    if not args.no_warm_cache:
        print("each chapter's references are graded once in the sandbox, to warm its Inductor cache "
              "(--no-warm-cache skips this)", file=sys.stderr, flush=True)
    assignments = build_course(args.outdir, notebooks, warm=not args.no_warm_cache)
    print(f"course directory: {Path(args.outdir).resolve()}")
    for name in assignments:
        print(f"  released {name}: {Path(args.outdir) / 'release' / name}")
        if not args.no_warm_cache:
            size = cache_size(inductor_cache(args.outdir, name))
            print(f"    sandbox cache from the references: {size / 2**20:.1f} MiB")
    return 0


def cmd_autograde(args) -> int:
    from .instructor.batch import summary_table
    from .instructor.course import autograde_course
    from .sandbox.driver import choose_isolation

    statuses = autograde_course(args.course_dir, jobs=args.jobs,
                                limits=Limits(cell_timeout_s=args.cell_timeout, task_timeout_s=args.case_timeout))
    print(summary_table(statuses))
    print(f"isolation: {choose_isolation().description}")
    root = Path(args.course_dir)
    print(f"gradebook: {root / 'gradebook.db'}; grades: {root / 'grades.csv'}; "
          f"records: {root / 'harness'}; reports: {root / 'reports'}")
    return 0


def cmd_gradescope_bundle(args) -> int:
    from .instructor.gradescope.bundle import build_bundle

    bundle = build_bundle(args.chapter, args.out, seed_from=args.seed_from)
    print(f"Gradescope autograder for chapter {bundle['chapter']}: {len(bundle['exercises'])} exercises, "
          f"{bundle['points']} points")
    print(f"  wrote {bundle['path']}")
    print("  upload it as a programming assignment's autograder with the Ubuntu 24.04 base image "
          "(Python 3.11+ is required); the zip holds the hidden cases' secret seed and the reference solutions: "
          "keep it private")
    return 0


def cmd_lint(args) -> int:
    from .instructor.lint import lint_course, lint_notebook

    problems = [problem for path in map(Path, args.notebooks)
                for problem in (lint_course(path, args.fix) if path.is_dir() else lint_notebook(path, args.fix))]
    for problem in problems:
        print(problem)
    open_problems = [p for p in problems if not p.fixed]
    fixable = sum(p.fixable for p in open_problems)
    if not open_problems:
        print(f"{', '.join(args.notebooks)}: in agreement with grader/chapters")
    else:
        print(f"{len(open_problems)} problems"
              + (f"; `python -m grader lint --fix` writes {fixable} of them" if fixable else ", for an author to fix"))
    return 1 if open_problems else 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m grader", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    check = commands.add_parser("check", help="run a notebook's check cells (public cases, the learner's words, in "
                                              "Chinese); exit 0 only if every exercise passes")
    check.add_argument("notebook")
    grade = commands.add_parser("grade", help="score one submission headless")
    grade.add_argument("submission")
    grade.add_argument("--json", metavar="OUT.json", help="write points, max points, pass/fail and reason per exercise")
    grade.add_argument("--junit", metavar="OUT.xml", help="also write a JUnit XML report")
    grade.add_argument("--gradescope", metavar="results.json", help="also write Gradescope's results.json")
    grade.add_argument("--seed", type=int, help="seed of the hidden cases (default: random)")
    for sub in (check, grade):
        sub.add_argument("--cell-timeout", type=float, default=120, help="seconds allowed per notebook cell (default 120)")
        sub.add_argument("--case-timeout", type=float, default=60, help="seconds allowed per exercise case (default 60)")
        sub.set_defaults(handler=cmd_check if sub is check else cmd_grade)

    release = commands.add_parser("release", help="build an nbgrader course directory and generate the releases")
    release.add_argument("outdir")
    release.add_argument("--assignment", action="append", metavar="chNN",
                         help="release only this chapter (repeatable, e.g. --assignment ch03); default: every graded chapter")
    release.add_argument("--no-warm-cache", action="store_true",
                         help="skip grading each source once to fill the sandboxes' Inductor cache (grading is slower)")
    release.set_defaults(handler=cmd_release)

    autograde = commands.add_parser("autograde", help="nbgrader autograde, feedback and CSV export of the collected submissions")
    autograde.add_argument("course_dir")
    autograde.add_argument("--jobs", type=int, default=2, help="submissions graded in parallel (default 2)")
    autograde.add_argument("--cell-timeout", type=float, default=120, help="seconds allowed per notebook cell (default 120)")
    autograde.add_argument("--case-timeout", type=float, default=60, help="seconds allowed per exercise case (default 60)")
    autograde.set_defaults(handler=cmd_autograde)

    bundle = commands.add_parser("gradescope-bundle", help="write a Gradescope autograder zip for one chapter")
    bundle.add_argument("chapter", help="chapter number, e.g. 03")
    bundle.add_argument("out", metavar="OUT.zip")
    bundle.add_argument("--seed-from", metavar="COURSE_DIR",
                        help="reuse the hidden cases' seed of a course directory (default: a new secret seed)")
    bundle.set_defaults(handler=cmd_gradescope_bundle)

    lint = commands.add_parser("lint", help="check the chapter notebooks against the exercise declarations "
                                            "(headings, answer and check cells, counts); exit 0 if they agree")
    lint.add_argument("notebooks", nargs="*", default=["notebooks"],
                      help="chapter notebooks, or a folder of all of them (default: notebooks)")
    lint.add_argument("--fix", action="store_true",
                      help="write what derives from the declarations: prompt headings, answer and check cells")
    lint.set_defaults(handler=cmd_lint)
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.handler(args)
    except GraderError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
