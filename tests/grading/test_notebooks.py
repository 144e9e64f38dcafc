"""Reading notebooks: clear errors for bad input; solution injection."""
import json

import nbformat
import pytest

from grader import chapters
from grader.errors import GraderError
from grader.grading.notebooks import check_cells, read_notebook
from grader.instructor.release import inject_solutions


def write_json(path, data):
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def minimal(cells):
    notebook = nbformat.v4.new_notebook()
    notebook.cells = cells
    return notebook


def check_cell(grade_id, points=1):
    return nbformat.v4.new_code_cell(f'check("{grade_id}")', metadata={"nbgrader": {
        "grade": True, "solution": False, "locked": True, "points": points,
        "grade_id": grade_id, "schema_version": 3}})


def test_missing_file(tmp_path):
    with pytest.raises(GraderError, match="no such notebook"):
        read_notebook(tmp_path / "absent.ipynb")


def test_malformed_json_names_the_line(tmp_path):
    path = tmp_path / "bad.ipynb"
    path.write_text('{"cells": [\n  {oops}\n]}', encoding="utf-8")
    with pytest.raises(GraderError, match="not valid notebook JSON \\(line 2"):
        read_notebook(path)


def test_non_utf8_file(tmp_path):
    path = tmp_path / "latin1.ipynb"
    path.write_bytes('{"cells": [], "comment": "café"}'.encode("latin-1"))
    with pytest.raises(GraderError, match="not UTF-8"):
        read_notebook(path)


def test_old_nbformat_version(tmp_path):
    path = write_json(tmp_path / "v3.ipynb", {"cells": [], "nbformat": 3, "nbformat_minor": 0, "metadata": {}})
    with pytest.raises(GraderError, match="nbformat 3"):
        read_notebook(path)


def test_json_that_is_not_a_notebook(tmp_path):
    with pytest.raises(GraderError, match="not a Jupyter notebook"):
        read_notebook(write_json(tmp_path / "list.ipynb", [1, 2]))


def test_no_graded_cells():
    with pytest.raises(GraderError, match="no graded cells"):
        check_cells(minimal([nbformat.v4.new_code_cell("1 + 1")]))


def test_unknown_exercise_id_lists_the_chapter_s_exercises():
    with pytest.raises(GraderError, match="unknown exercise id '03.nope'.*03.op_census"):
        check_cells(minimal([check_cell("check-03-nope")]))


def test_injection_puts_the_reference_body_between_markers_after_the_declared_stub():
    stub = nbformat.v4.new_code_cell("anything: the declaration decides", metadata={"nbgrader": {
        "grade": False, "solution": True, "locked": False, "grade_id": "answer-03-op_census", "schema_version": 3}})
    source = inject_solutions(minimal([stub])).cells[0].source
    assert source.startswith(chapters.get("03.op_census").stub + "\n    ### BEGIN SOLUTION\n")
    assert source.endswith("\n    ### END SOLUTION")
    assert "NotImplementedError" not in source and "Counter()" in source
