"""The instructor's flow on real nbgrader: release, collect, autograde, feedback, CSV."""
import csv
import subprocess
import sys

from notebook_builders import write_filled, wrong_answer_source
from wrong_ch03 import fold_conv_bn_ignoring_users


def test_release_then_autograde_a_correct_and_a_wrong_submission(tmp_path):
    course = tmp_path / "course"
    done = subprocess.run([sys.executable, "-m", "grader", "release", str(course)],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr

    released = (course / "release" / "ch03" / "03_fx.ipynb").read_text(encoding="utf-8")
    source = (course / "source" / "ch03" / "03_fx.ipynb").read_text(encoding="utf-8")
    assert "BEGIN SOLUTION" in source and "BEGIN SOLUTION" not in released
    assert "Counter()" not in released and "YOUR CODE HERE" in released
    assert (course / ".grader_seed").read_text() not in released

    for student, overrides in [("alice", None), ("bob", {
            "03.fold_conv_bn": wrong_answer_source(fold_conv_bn_ignoring_users, "fold_conv_bn")})]:
        target = course / "submitted" / student / "ch03"
        target.mkdir(parents=True)
        write_filled(target / "03_fx.ipynb", notebook_path=course / "release" / "ch03" / "03_fx.ipynb",
                     overrides=overrides)
    done = subprocess.run([sys.executable, "-m", "grader", "autograde", str(course)],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr

    with open(course / "grades.csv", newline="", encoding="utf-8") as grades:
        scores = {row["student_id"]: (float(row["score"]), float(row["max_score"])) for row in csv.DictReader(grades)}
    assert scores == {"alice": (12.0, 12.0), "bob": (9.0, 12.0)}
    feedback = (course / "feedback" / "bob" / "ch03" / "03_fx.html").read_text(encoding="utf-8")
    assert "03.fold_conv_bn" in feedback
