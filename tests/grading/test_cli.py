"""``python -m grader``: grading filled notebooks headless, and clear errors for bad input."""
import json
import subprocess
import sys

import pytest

from grader import chapters
from notebook_builders import write_filled, wrong_answer_source
from answers_ch03 import remove_dropout_seed


def run_grader(*arguments, cwd=None):
    return subprocess.run([sys.executable, "-m", "grader", *arguments], capture_output=True,
                          text=True, cwd=cwd, check=False)


def test_grade_scores_a_correct_and_a_wrong_notebook(tmp_path):
    correct = write_filled(tmp_path / "correct.ipynb")
    wrong = write_filled(tmp_path / "wrong.ipynb", overrides={
        "03.remove_dropout": wrong_answer_source(remove_dropout_seed, "remove_dropout")})
    for notebook in (correct, wrong):
        done = run_grader("grade", str(notebook), "--json", str(notebook.with_suffix(".json")), "--seed", "7")
        assert done.returncode == 0, done.stderr
    good = json.loads(correct.with_suffix(".json").read_text())
    bad = json.loads(wrong.with_suffix(".json").read_text())
    points = {exercise.id: exercise.points for exercise in chapters.chapter("03")}
    assert good["points"] == good["max_points"] == sum(points.values())
    assert all(e["passed"] for e in good["exercises"])
    by_id = {e["exercise"]: e for e in bad["exercises"]}
    assert bad["points"] == good["points"] - points["03.remove_dropout"] and not by_id["03.remove_dropout"]["passed"]
    assert "Dropout" in by_id["03.remove_dropout"]["reason"]


def test_check_speaks_the_notebooks_words_and_its_exit_status_follows_the_result(tmp_path):
    stub = run_grader("check", "notebooks/03_fx.ipynb")
    assert stub.returncode == 1
    lines = stub.stdout.splitlines()
    assert lines[0].startswith("○ 还没有作答 03.op_census") and "还没有实现" in lines[0]
    assert lines[-1] == f"合计：0/{sum(e.points for e in chapters.chapter('03'))} 分（公开用例；隐藏用例只在评分时运行）"
    correct = run_grader("check", str(write_filled(tmp_path / "03_fx.ipynb")))
    assert correct.returncode == 0, correct.stdout
    assert all(line.startswith("√ 通过") for line in correct.stdout.splitlines()[:-1])


def test_check_of_a_missing_notebook_says_so_in_chinese(tmp_path):
    done = run_grader("check", str(tmp_path / "nope.ipynb"))
    assert done.returncode == 2 and done.stderr.startswith("错误：无法检查这本笔记本") and "Traceback" not in done.stderr


@pytest.mark.parametrize("content, message", [
    (None, "no such notebook"),
    (b"{not json", "not valid notebook JSON"),
    ('{"cells": [], "nbformat": 4, "nbformat_minor": 5, "metadata": {}}'.encode(), "no graded cells"),
])
def test_bad_input_is_one_clear_line(tmp_path, content, message):
    path = tmp_path / "input.ipynb"
    if content is not None:
        path.write_bytes(content)
    done = run_grader("grade", str(path))
    assert done.returncode == 2
    assert done.stderr.startswith("error: ") and message in done.stderr
    assert "Traceback" not in done.stderr


def test_unknown_exercise_id_is_one_clear_line(tmp_path):
    notebook = {"cells": [{"cell_type": "code", "source": 'check("03.nope")', "metadata": {"nbgrader": {
        "grade": True, "solution": False, "locked": True, "points": 1, "grade_id": "check-03-nope",
        "schema_version": 3}}, "outputs": [], "execution_count": None}],
        "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    path = tmp_path / "unknown.ipynb"
    path.write_text(json.dumps(notebook))
    done = run_grader("check", str(path))
    assert done.returncode == 2 and "unknown exercise id '03.nope'" in done.stderr


def test_autograde_outside_a_course_directory(tmp_path):
    done = run_grader("autograde", str(tmp_path))
    assert done.returncode == 2 and "not a course directory" in done.stderr


def test_release_of_an_unknown_assignment_names_the_available_ones(tmp_path):
    done = run_grader("release", str(tmp_path / "course"), "--assignment", "ch99")
    assert done.returncode == 2 and "unknown assignment ch99; available: ch00" in done.stderr
    assert "ch03" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "course").exists()
