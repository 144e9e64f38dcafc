"""The secret seed of the random hidden cases: one per course directory or Gradescope bundle.

One per course, not one per student: the same answer gets the same score (a regrade
request can be answered), and a batch computes the references' facts once per case. A
weak draw cannot let a class's known mistakes through, because those are rejected by the
designed hidden cases, which are the same on every seed.

It lives in a file of its own (``.grader_seed``) so that it stays out of every release
and the sandbox can be kept from reading it.
"""
from __future__ import annotations

import secrets
from pathlib import Path

from ..errors import GraderError

SEED_FILE = ".grader_seed"


def new_seed() -> int:
    return secrets.randbelow(2**31)


def ensure_seed(directory: Path) -> int:
    """The seed kept in ``directory``, drawn afresh the first time."""
    path = Path(directory) / SEED_FILE
    if not path.exists():
        path.write_text(str(new_seed()), encoding="utf-8")
    return course_seed(directory)


def course_seed(directory: Path) -> int:
    path = Path(directory) / SEED_FILE
    try:
        return int(path.read_text(encoding="utf-8").strip())
    except FileNotFoundError:
        raise GraderError(f"no {SEED_FILE} in {directory}; create a course with `python -m grader release`") from None
    except ValueError:
        raise GraderError(f"{path} does not hold a seed (an integer)") from None
