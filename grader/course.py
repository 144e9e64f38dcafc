"""The instructor's side, on real nbgrader commands: build a course, release, autograde.

Layout of a course directory (nbgrader's own)::

    nbgrader_config.py    written here: hidden cases on, the course's secret seed
    .grader_seed          the secret seed of the hidden cases (keep it out of releases)
    source/ch03/03_fx.ipynb      notebooks/ with reference solutions injected
    release/ch03/03_fx.ipynb     nbgrader generate_assignment: no solutions
    submitted/<student>/ch03/03_fx.ipynb   collected by the instructor
    autograded/, feedback/, gradebook.db, grades.csv
"""
from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path

import nbformat

from .errors import GraderError
from .notebooks import check_cells, inject_solutions, read_notebook, strip_outputs

NOTEBOOKS_DIR = Path(__file__).resolve().parent.parent / "notebooks"

CONFIG_TEMPLATE = '''\
"""nbgrader configuration written by `python -m grader release`."""
import os
from pathlib import Path

c = get_config()  # noqa: F821 (provided by nbgrader)
c.CourseDirectory.root = str(Path(__file__).resolve().parent)
c.CourseDirectory.course_id = "pytorch-compiler-course"
c.Execute.timeout = {timeout}
# Deleted check cells are put back, so removing one cannot dodge its points.
c.OverwriteCells.add_missing_cells = True

# Check cells run the hidden cases when grading; the seed is this course's secret.
os.environ["COURSE_GRADER_MODE"] = "grade"
os.environ["COURSE_GRADER_SEED"] = (Path(__file__).resolve().parent / ".grader_seed").read_text().strip()
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


def run_nbgrader(course_dir: Path, *arguments: str) -> subprocess.CompletedProcess:
    """Run one nbgrader command inside ``course_dir``; raise with its log on failure.

    nbgrader calls helper programs (``alembic``) by name, so this interpreter's scripts
    folder goes first on PATH even when its virtualenv is not activated.
    """
    scripts = str(Path(sys.executable).parent)
    env = {**os.environ, "PATH": scripts + os.pathsep + os.environ.get("PATH", "")}
    done = subprocess.run([sys.executable, "-m", "nbgrader", *arguments], cwd=course_dir,
                          capture_output=True, text=True, check=False, env=env)
    if done.returncode != 0:
        log = (done.stderr or done.stdout).strip().splitlines()[-15:]
        raise GraderError(f"nbgrader {' '.join(arguments)} failed:\n" + "\n".join(log))
    return done


def build_course(course_dir, notebooks: list[Path] | None = None, *, timeout: int = 300) -> list[str]:
    """Write the course directory with injected sources and generate the releases."""
    course_dir = Path(course_dir)
    course_dir.mkdir(parents=True, exist_ok=True)
    (course_dir / "nbgrader_config.py").write_text(CONFIG_TEMPLATE.format(timeout=timeout), encoding="utf-8")
    seed_file = course_dir / ".grader_seed"
    if not seed_file.exists():
        seed_file.write_text(str(secrets.randbelow(2**31)), encoding="utf-8")
    assignments = []
    for notebook_path in notebooks or graded_notebooks():
        name = assignment_name(notebook_path)
        source = course_dir / "source" / name / notebook_path.name
        source.parent.mkdir(parents=True, exist_ok=True)
        filled = strip_outputs(inject_solutions(read_notebook(notebook_path)))
        nbformat.write(filled, source)
        run_nbgrader(course_dir, "generate_assignment", name, "--force")
        assignments.append(name)
    if not assignments:
        raise GraderError("no chapter notebook with graded cells was found")
    return assignments


def submitted_assignments(course_dir: Path) -> list[str]:
    return sorted({p.parent.name for p in course_dir.glob("submitted/*/*/*.ipynb")})


def autograde_course(course_dir) -> Path:
    """nbgrader autograde + generate_feedback for every submitted assignment, then CSV export."""
    course_dir = Path(course_dir)
    if not (course_dir / "nbgrader_config.py").is_file():
        raise GraderError(f"{course_dir} is not a course directory (no nbgrader_config.py); create one with `python -m grader release`")
    assignments = submitted_assignments(course_dir)
    if not assignments:
        raise GraderError(f"no submissions under {course_dir / 'submitted'} (expected submitted/STUDENT/ASSIGNMENT/*.ipynb)")
    for name in assignments:
        run_nbgrader(course_dir, "autograde", name, "--force")
        run_nbgrader(course_dir, "generate_feedback", name, "--force")
    run_nbgrader(course_dir, "export", "--to", "grades.csv")
    return course_dir / "grades.csv"
