"""Submissions that are damaged rather than malicious: graded from what is there, or
refused with one clear reason (bad JSON, old nbformat and non-UTF-8 are covered in
test_notebooks.py and test_cli.py)."""
import nbformat

from grader import chapters
from grader.grading.harness import SOLUTIONS_DIR, grade_file
from grader.sandbox.confinement import Limits
from notebook_builders import write_answers_only

FAST = Limits(cell_timeout_s=30, task_timeout_s=20, protected_paths=(str(SOLUTIONS_DIR),))
CHAPTER_03 = list(chapters.chapter("03"))
FULL_MARKS = sum(exercise.points for exercise in CHAPTER_03)


def strip_nbgrader_metadata(notebook):
    for cell in notebook.cells:
        cell.metadata.pop("nbgrader", None)


def test_missing_nbgrader_metadata_still_grades_the_assignment(tmp_path):
    path = write_answers_only(tmp_path / "03_fx.ipynb", edit=strip_nbgrader_metadata)
    by_batch = grade_file(path, seed=1, limits=FAST, exercises=CHAPTER_03)  # as autograde does
    by_name = grade_file(path, seed=1, limits=FAST)  # chapter taken from the file name
    assert by_batch.points == by_name.points == FULL_MARKS


def add_huge_outputs(notebook):
    for cell in notebook.cells:
        if cell.cell_type == "code":
            cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text="x" * 5_000_000)]


def test_huge_outputs_are_ignored(tmp_path):
    path = write_answers_only(tmp_path / "huge.ipynb", edit=add_huge_outputs)
    assert path.stat().st_size > 30_000_000
    assert grade_file(path, seed=1, limits=FAST).points == FULL_MARKS
