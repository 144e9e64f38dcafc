"""The instructor's side, on real nbgrader commands: build a course, release, autograde.

Layout of a course directory (nbgrader's own)::

    nbgrader_config.py    written here: autograde through the isolated harness
    .grader_seed          the secret seed of the hidden cases (keep it out of releases)
    source/ch03/03_fx.ipynb      notebooks/ with reference solutions injected
    release/ch03/03_fx.ipynb     nbgrader generate_assignment: no solutions
    submitted/<student>/ch03/03_fx.ipynb   collected by the instructor
    harness/<assignment>/<student>/<notebook>.json   the isolated harness's records
    cache/inductor/<assignment>/   what the references compiled in the sandbox (see .warm_cache)
    autograded/, feedback/, gradebook.db, grades.csv, reports/ (JUnit, Gradescope)
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import nbformat

from ..errors import GraderError
from ..grading.harness import SOLUTIONS_DIR, graded_exercises
from ..grading.notebooks import check_cells, read_notebook
from ..sandbox.confinement import Limits
from .batch import Job, JobStatus, run_jobs, statuses_json
from .nbgrader_bridge import results_path
from .release import inject_solutions, strip_outputs
from .reports import write_gradescope, write_junit
from .seed import course_seed, ensure_seed
from .warm_cache import inductor_cache, warm_inductor_cache

NOTEBOOKS_DIR = Path(__file__).resolve().parents[2] / "notebooks"

CONFIG_TEMPLATE = '''\
"""nbgrader configuration written by `python -m grader release`."""
from pathlib import Path

from grader.instructor.nbgrader_bridge import autograde_preprocessors

c = get_config()  # noqa: F821 (provided by nbgrader)
root = Path(__file__).resolve().parent
c.CourseDirectory.root = str(root)
c.CourseDirectory.course_id = "pytorch-compiler-course"
# Deleted check cells are put back, so removing one cannot dodge its points.
c.OverwriteCells.add_missing_cells = True
# Submissions never run next to the tests: the isolated harness grades them and
# IsolatedGrading writes its verdicts into the check cells in place of Execute.
c.Autograde.autograde_preprocessors = autograde_preprocessors()
c.IsolatedGrading.course_root = str(root)
# nbgrader collect never takes a submission filed under another student's name.
c.ExchangeFactory.collect = "grader.instructor.exchange.OwnerCheckedCollect"
'''


def assignment_name(notebook: Path) -> str:
    """``03_fx.ipynb`` → ``ch03``."""
    return "ch" + notebook.name.split("_", 1)[0]


def graded_notebooks(notebooks_dir: Path = NOTEBOOKS_DIR) -> list[Path]:
    """Chapter notebooks that contain graded cells."""
    found = []
    for path in sorted(notebooks_dir.glob("[0-9][0-9]_*.ipynb")):
        try:
            check_cells(read_notebook(path))
        except GraderError:
            continue
        found.append(path)
    return found


def select_notebooks(assignments: list[str]) -> list[Path]:
    """The graded chapter notebooks of the named assignments (``ch03``), so that a class
    can be given one chapter at a time; an unknown name is an error, not an empty release."""
    available = {assignment_name(path): path for path in graded_notebooks()}
    unknown = [name for name in assignments if name not in available]
    if unknown:
        raise GraderError(f"unknown assignment {', '.join(unknown)}; available: {', '.join(available)}")
    return [available[name] for name in assignments]


def _say(step: str) -> None:
    """A step of a long command, on stderr beside the batch's progress lines."""
    print(step, file=sys.stderr, flush=True)


def run_nbgrader(course_dir: Path, *arguments: str) -> subprocess.CompletedProcess:
    """Run one nbgrader command inside ``course_dir``; raise with its log on failure.

    nbgrader calls helper programs (``alembic``) by name, so this interpreter's scripts
    folder goes first on PATH even when its virtualenv is not activated.
    """
    scripts = str(Path(sys.executable).parent)
    env = {**os.environ, "PATH": scripts + os.pathsep + os.environ.get("PATH", "")}
    done = subprocess.run([sys.executable, "-m", "nbgrader", *arguments], cwd=course_dir,
                          capture_output=True, text=True, check=False, env=env)
    # nbgrader logs a broken config file and goes on with its defaults: treat that as fatal.
    if done.returncode != 0 or "Exception while loading config file" in done.stderr:
        log = (done.stderr or done.stdout).strip().splitlines()[-15:]
        raise GraderError(f"nbgrader {' '.join(arguments)} failed:\n" + "\n".join(log))
    return done


def build_course(course_dir, notebooks: list[Path] | None = None, *, warm: bool = True) -> list[str]:
    """Write the course directory with injected sources and generate the releases; with
    ``warm``, grade each source once to fill its sandbox cache (:mod:`.warm_cache`)."""
    course_dir = Path(course_dir)
    course_dir.mkdir(parents=True, exist_ok=True)
    (course_dir / "nbgrader_config.py").write_text(CONFIG_TEMPLATE, encoding="utf-8")
    ensure_seed(course_dir)
    assignments = []
    selected = notebooks or graded_notebooks()
    for number, notebook_path in enumerate(selected, 1):
        name = assignment_name(notebook_path)
        source = course_dir / "source" / name / notebook_path.name
        source.parent.mkdir(parents=True, exist_ok=True)
        filled = strip_outputs(inject_solutions(read_notebook(notebook_path)))
        nbformat.write(filled, source)
        _say(f"[{number}/{len(selected)}] {name}: nbgrader generate_assignment")
        run_nbgrader(course_dir, "generate_assignment", name, "--force")
        if warm:
            _say(f"[{number}/{len(selected)}] {name}: grading the references in the sandbox (warms its Inductor cache)")
            warm_inductor_cache(course_dir, name, source, course_seed(course_dir), _protecting(course_dir, Limits()))
        assignments.append(name)
    if not assignments:
        raise GraderError("no chapter notebook with graded cells was found")
    return assignments


def _protecting(course_dir: Path, limits: Limits) -> Limits:
    """``limits`` with the solutions and the course directory hidden from the sandbox."""
    return replace(limits, protected_paths=(str(SOLUTIONS_DIR), str(course_dir.resolve())))


def collect_jobs(course_dir: Path, limits: Limits) -> list[Job]:
    """One job per submitted notebook of a released assignment."""
    limits = _protecting(course_dir, limits)
    seed = course_seed(course_dir)
    jobs = []
    for path in sorted(course_dir.glob("submitted/*/*/*.ipynb")):
        student, assignment = path.parent.parent.name, path.parent.name
        source = course_dir / "source" / assignment / path.name
        if not source.is_file():
            continue  # not a notebook of this course's assignments
        exercise_ids = tuple(e.id for e in graded_exercises(read_notebook(source), source.name))
        cache = inductor_cache(course_dir, assignment)
        jobs.append(Job(student, assignment, path.stem, str(path), exercise_ids, seed,
                        str(results_path(course_dir, student, assignment, path.stem)),
                        replace(limits, inductor_cache=str(cache) if cache.is_dir() else "")))
    return jobs


def _record_invalid_in_gradebook(course_dir: Path, statuses: list[JobStatus]) -> None:
    """A submission nbgrader cannot open still gets a row (0 points) in the gradebook."""
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course_dir / 'gradebook.db'}") as gradebook:
        for status in statuses:
            gradebook.update_or_create_student(status.student)
            try:
                gradebook.find_submission(status.assignment, status.student)
            except Exception:
                gradebook.add_submission(status.assignment, status.student)


def autograde_course(course_dir, *, jobs: int = 2, limits: Limits = Limits()) -> list[JobStatus]:
    """Isolated grading of every submission in parallel, then nbgrader autograde,
    feedback and CSV export, plus JSON, JUnit XML and Gradescope reports."""
    course_dir = Path(course_dir)
    if not (course_dir / "nbgrader_config.py").is_file():
        raise GraderError(f"{course_dir} is not a course directory (no nbgrader_config.py); create one with `python -m grader release`")
    if limits.threads is None:  # the jobs share the cores
        limits = replace(limits, threads=max(1, len(os.sched_getaffinity(0)) // jobs))
    work = collect_jobs(course_dir, limits)
    if not work:
        raise GraderError(f"no submissions under {course_dir / 'submitted'} (expected submitted/STUDENT/ASSIGNMENT/NOTEBOOK.ipynb)")
    _say(f"grading {len(work)} submissions, {jobs} at a time, each in its own sandbox")
    statuses = run_jobs(work, jobs)
    for assignment in sorted({s.assignment for s in statuses}):
        mine = [s for s in statuses if s.assignment == assignment]
        unreadable = [s for s in mine if s.status != "graded"]
        exclude = ",".join(s.student for s in unreadable)
        if len(unreadable) < len(mine):
            _say(f"{assignment}: nbgrader autograde and generate_feedback ({len(mine) - len(unreadable)} submissions)")
            run_nbgrader(course_dir, "autograde", assignment, "--force",
                         *([f"--CourseDirectory.student_id_exclude={exclude}"] if exclude else []))
            run_nbgrader(course_dir, "generate_feedback", assignment, "--force",
                         *([f"--CourseDirectory.student_id_exclude={exclude}"] if exclude else []))
        _record_invalid_in_gradebook(course_dir, unreadable)
    run_nbgrader(course_dir, "export", "--to", "grades.csv")
    records = [json.loads(Path(job.record_path).read_text(encoding="utf-8")) for job in work]
    reports = course_dir / "reports"
    write_junit(records, reports / "junit.xml")
    for record in records:
        write_gradescope(record, reports / "gradescope" / record["assignment"] / f"{record['student']}.json")
    (reports / "summary.json").write_text(json.dumps(statuses_json(statuses), ensure_ascii=False, indent=1),
                                          encoding="utf-8")
    return statuses
