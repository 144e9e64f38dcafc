"""nbgrader's exchange for a class on one machine, and the instructor's side of chapter 03
(release; collect, grade through the isolated harness, return feedback), as the exchange
test and the JupyterHub test both run them with real accounts (:mod:`class_accounts`):
student one answers with the references, student two with a wrong fold."""
from __future__ import annotations

import os
import re
from pathlib import Path

from answers_ch03 import fold_conv_bn_ignoring_users
from grader import chapters
from notebook_builders import wrong_answer_source

COURSE_ID = "pytorch-compiler-course"
POINTS = {exercise.id: exercise.points for exercise in chapters.chapter("03")}
FULL = sum(POINTS.values())
WRONG = {"03.fold_conv_bn": wrong_answer_source(fold_conv_bn_ignoring_users, "fold_conv_bn")}
# The snippet the README gives for /etc/jupyter/nbgrader_config.py, here per account.
EXCHANGE_CONFIG = """c = get_config()
c.Exchange.root = {root!r}
c.CourseDirectory.course_id = "pytorch-compiler-course"
"""


def open_exchange(root: Path, accounts) -> Path:
    """The exchange folder under ``root``, and every account's nbgrader config pointing at it."""
    exchange = root / "exchange"
    exchange.mkdir()
    exchange.chmod(0o1777)  # like /tmp: anyone may create, nobody may rename another's folder
    for account in accounts:
        account.write(account.home / ".jupyter" / "nbgrader_config.py", EXCHANGE_CONFIG.format(root=str(exchange)))
    return exchange


def release_chapter_03(teacher) -> Path:
    """The README's release steps as ``teacher``; returns the course directory."""
    course = teacher.home / "course"
    released = teacher.succeed("python", "-m", "grader", "release", course, "--assignment", "ch03")
    assert "[1/1] ch03: grading the references" in released, released  # a long command shows its progress
    teacher.succeed("chmod", "700", course)
    assert sorted(p.name for p in (course / "release").iterdir()) == ["ch03"]
    teacher.succeed("python", "-m", "nbgrader", "release_assignment", "ch03", cwd=course)
    return course


def grade_and_return(teacher, course: Path) -> None:
    """Collect the submissions, grade them in the isolated harness, release the feedback."""
    teacher.succeed("python", "-m", "nbgrader", "collect", "ch03", cwd=course)
    graded = teacher.succeed("python", "-m", "grader", "autograde", course, "--case-timeout", "30", cwd=course)
    assert "grading 2 submissions" in graded and "2/2 ch03/" in graded, graded  # progress, then the table
    if os.environ.get("GRADER_REQUIRE_BUBBLEWRAP") == "1":
        assert "isolation: bubblewrap" in graded, graded
    teacher.succeed("python", "-m", "nbgrader", "release_feedback", "ch03", cwd=course)


def feedback_score(html: str) -> tuple[float, float]:
    """(score, maximum) from chapter 03's feedback page."""
    found = re.search(r"03_fx \(Score: ([\d.]+) / ([\d.]+)\)", html)
    assert found, html[:2000]
    return float(found.group(1)), float(found.group(2))


def assert_own_scores(one_feedback: str, two_feedback: str) -> None:
    """Full marks in student one's feedback, the wrong fold's partial credit in student two's."""
    assert feedback_score(one_feedback) == (FULL, FULL)
    two_score, two_max = feedback_score(two_feedback)
    assert FULL - POINTS["03.fold_conv_bn"] <= two_score < FULL == two_max
