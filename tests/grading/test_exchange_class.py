"""A class on one multi-user machine: nbgrader's exchange between real Linux accounts.

The instructor releases chapter 03 from the course directory into the exchange, two
students fetch it, answer and submit; the instructor collects, grades through the isolated
harness and returns feedback, which each student fetches with their own score. Then the
second student tries to reach what is not theirs. JupyterHub is not started here (tests/hub
does): it only puts a web login in front of these same accounts, exchange and commands.

Creating accounts needs root (CI runs as root): otherwise the test is skipped, and fails
instead when GRADER_REQUIRE_EXCHANGE=1. About 5 minutes on a busy 2-core machine: 14 nbgrader
commands of 10-15 s each (their start-up) and 100 s of grading.
"""
from pathlib import Path

import pytest

from class_accounts import assert_allowed, assert_denied, class_accounts, class_folder
from class_exchange import (COURSE_ID, WRONG, assert_own_scores, grade_and_return, open_exchange,
                            release_chapter_03)
from notebook_builders import write_filled

LIST = "os.listdir(path)"
READ = "open(path, 'rb').read()"
WRITE = "open(path, 'w').write('x')"


@pytest.fixture
def class_root():
    with class_folder("GRADER_REQUIRE_EXCHANGE") as root:
        yield root


def run_the_class(root: Path, teacher, students: dict, answers: dict, scratch: Path) -> Path:
    """Release → fetch, answer, submit → collect, autograde, release feedback → fetch
    feedback, each step as its own account; returns the course directory."""
    open_exchange(root, (teacher, *students.values()))
    course = release_chapter_03(teacher)

    for name, student in students.items():
        student.succeed("python", "-m", "nbgrader", "fetch_assignment", "ch03")
        fetched = student.home / "ch03" / "03_fx.ipynb"
        answered = write_filled(scratch / f"{name}.ipynb", notebook_path=fetched, overrides=answers[name])
        student.write(fetched, answered.read_text(encoding="utf-8"))
        student.succeed("python", "-m", "nbgrader", "submit", "ch03")

    grade_and_return(teacher, course)
    for student in students.values():
        student.succeed("python", "-m", "nbgrader", "fetch_feedback", "ch03")
    return course


def own_feedback(student) -> Path:
    found = list((student.home / "ch03" / "feedback").glob("*/03_fx.html"))
    assert len(found) == 1, found
    return found[0]


def test_two_students_exchange_chapter_03_and_cannot_reach_each_other(class_root, tmp_path):
    with class_accounts(("teach", "one", "two"), class_root) as accounts:
        teacher, one, two = accounts["teach"], accounts["one"], accounts["two"]
        course = run_the_class(class_root, teacher, {"one": one, "two": two},
                               {"one": {}, "two": WRONG}, tmp_path)

        # Each student fetched their own feedback with their own score.
        assert_own_scores(own_feedback(one).read_text(encoding="utf-8"), own_feedback(two).read_text(encoding="utf-8"))

        # inbound/: nobody but the instructor lists it, and a submission's folder name ends in
        # a random part, so knowing the student, the assignment and even the exact time is not enough.
        inbound = class_root / "exchange" / COURSE_ID / "inbound"
        submitted = {p.name.split("+")[0]: p for p in inbound.iterdir()}
        assert set(submitted) == {one.name, two.name}
        assert assert_allowed(teacher, "print(sorted(os.listdir(path)))", inbound).count("+ch03+") == 2
        assert_denied(two, LIST, inbound)
        name, assignment, timestamp, random_part = submitted[one.name].name.split("+")
        assert (name, assignment, len(random_part)) == (one.name, "ch03", 12)
        assert_allowed(one, READ, submitted[one.name] / "03_fx.ipynb")
        assert_denied(two, READ, inbound / f"{one.name}+ch03+{timestamp}" / "03_fx.ipynb", "FileNotFoundError")

        # Student one's home (nbgrader's cache with the submission's name and secret, the
        # fetched feedback) and the exchange's feedback folder are closed to student two.
        assert_allowed(one, READ, own_feedback(one))
        assert_denied(two, READ, own_feedback(one))
        assert_denied(two, LIST, one.home)
        feedback = class_root / "exchange" / COURSE_ID / "feedback"
        assert assert_allowed(teacher, "print(os.listdir(path))", feedback).count(".html") == 2
        assert_denied(two, LIST, feedback)

        # The instructor's course directory: solutions, the hidden cases' seed, the gradebook.
        for secret in (course / "source" / "ch03" / "03_fx.ipynb", course / ".grader_seed", course / "gradebook.db"):
            assert_allowed(teacher, READ, secret)
            assert_denied(two, READ, secret)
        assert_denied(two, LIST, course / "submitted")

        # outbound/: the released notebook cannot be replaced, nor a fake assignment added.
        outbound = class_root / "exchange" / COURSE_ID / "outbound"
        for target in (outbound / "ch03" / "03_fx.ipynb", outbound / "ch03" / "extra.py", outbound / "ch99"):
            assert_denied(two, WRITE, target)
        assert_allowed(teacher, WRITE + "; os.remove(path)", outbound / "ch03" / "extra.py")

        # The course's exchange folder cannot be renamed away (and replaced by a fake one).
        course_exchange = class_root / "exchange" / COURSE_ID
        mine = class_root / "exchange" / f"{two.name}-folder"
        assert_allowed(two, "os.mkdir(path); os.rename(path, path + '-renamed')", mine)
        assert_denied(two, "os.rename(path, path + '-gone')", course_exchange)

        # A submission filed under student one's name by student two is not collected (the
        # course's OwnerCheckedCollect); nbgrader's own collect would take it, being newer.
        two.succeed("python", "-m", "nbgrader", "submit", "ch03", f"--student={one.name}")
        stamp = course / "submitted" / one.name / "ch03" / "timestamp.txt"
        genuine = stamp.read_text()
        log = teacher.succeed("python", "-m", "nbgrader", "collect", "ch03", "--update", cwd=course)
        assert "Not collected" in log and stamp.read_text() == genuine
        teacher.succeed("python", "-m", "nbgrader", "collect", "ch03", "--update",
                        "--ExchangeFactory.collect=nbgrader.exchange.default.collect.ExchangeCollect", cwd=course)
        assert stamp.read_text() != genuine
