"""The instructor's flow on real nbgrader: release, collect, isolated autograde of a batch
with a correct, a wrong, a hanging, a crashing and a broken submission; reports; re-run."""
import csv
import json
import subprocess
import sys
from xml.etree import ElementTree

import pytest

from grader import chapters
from notebook_builders import write_answers_only, write_filled, wrong_answer_source
from answers_ch03 import fold_conv_bn_ignoring_users

HANGS = "def count_ops(gm):\n    while True:\n        try:\n            pass\n        except BaseException:\n            pass\n"
CRASHES = "import os\ndef relu_to_gelu(gm):\n    return gm\nos._exit(3)\n"


def grader(*arguments):
    return subprocess.run([sys.executable, "-m", "grader", *arguments], capture_output=True, text=True, check=False)


POINTS = {exercise.id: exercise.points for exercise in chapters.chapter("03")}
FULL = sum(POINTS.values())
# bob's wrong fold_conv_bn earns partial credit on the cases it passes: the harness's points,
# which nbgrader's gradebook must hold too.
EXPECTED_WITHOUT_BOB = {"alice": FULL, "carol": FULL - POINTS["03.op_census"],
                        "dave": FULL - POINTS["03.relu_to_gelu"], "erin": 0.0}


def read_grades(course):
    with open(course / "grades.csv", newline="", encoding="utf-8") as grades:
        return {row["student_id"]: float(row["score"]) for row in csv.DictReader(grades) if row["assignment"] == "ch03"}


def test_release_and_batch_autograde(tmp_path):
    course = tmp_path / "course"
    done = grader("release", str(course), "--assignment", "ch03")
    assert done.returncode == 0, done.stderr
    assert (course / "cache" / "inductor" / "ch03").is_dir() and "sandbox cache" in done.stdout
    release = course / "release" / "ch03" / "03_fx.ipynb"
    released, source = release.read_text(encoding="utf-8"), (course / "source" / "ch03" / "03_fx.ipynb").read_text(encoding="utf-8")
    assert "BEGIN SOLUTION" in source and "BEGIN SOLUTION" not in released
    assert "Counter()" not in released and "YOUR CODE HERE" in released
    assert (course / ".grader_seed").read_text() not in released

    def submit(student):
        target = course / "submitted" / student / "ch03"
        target.mkdir(parents=True)
        return target / "03_fx.ipynb"

    write_filled(submit("alice"), notebook_path=release)
    write_filled(submit("bob"), notebook_path=release, overrides={
        "03.fold_conv_bn": wrong_answer_source(fold_conv_bn_ignoring_users, "fold_conv_bn")})
    write_answers_only(submit("carol"), {"03.op_census": HANGS}, notebook_path=release)
    write_answers_only(submit("dave"), {"03.relu_to_gelu": CRASHES}, notebook_path=release)
    submit("erin").write_text('{"cells": [', encoding="utf-8")

    arguments = ["autograde", str(course), "--jobs", "2", "--case-timeout", "5", "--cell-timeout", "60"]
    done = grader(*arguments)
    assert done.returncode == 0, done.stderr
    bob = json.loads((course / "harness" / "ch03" / "bob" / "03_fx.json").read_text())
    fold = next(e for e in bob["exercises"] if e["exercise"] == "03.fold_conv_bn")
    assert 0 < fold["points"] < POINTS["03.fold_conv_bn"]
    expected_grades = {**EXPECTED_WITHOUT_BOB, "bob": FULL - POINTS["03.fold_conv_bn"] + fold["points"]}
    assert read_grades(course) == pytest.approx(expected_grades)
    assert "erin" in done.stdout and "invalid" in done.stdout

    carol = json.loads((course / "harness" / "ch03" / "carol" / "03_fx.json").read_text())
    assert "超时" in next(e for e in carol["exercises"] if e["exercise"] == "03.op_census")["reason"]
    feedback = (course / "feedback" / "bob" / "ch03" / "03_fx.html").read_text(encoding="utf-8")
    assert "03.fold_conv_bn" in feedback and "隐藏用例" in feedback
    suites = ElementTree.parse(course / "reports" / "junit.xml").getroot()
    assert {s.get("name") for s in suites} == {f"ch03/{n}" for n in ("alice", "bob", "carol", "dave", "erin")}
    gradescope = json.loads((course / "reports" / "gradescope" / "ch03" / "alice.json").read_text())
    points_tests = [t for t in gradescope["tests"] if t["visibility"] == "after_published"]
    assert gradescope["score"] == FULL and len(points_tests) == len(POINTS)
    assert sum(t["score"] for t in gradescope["tests"]) == FULL

    again = grader(*arguments)
    assert again.returncode == 0, again.stderr
    assert again.stdout.count("reused") == 5
    assert read_grades(course) == pytest.approx(expected_grades)
