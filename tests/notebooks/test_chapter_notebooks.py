"""Chapter notebooks: stored clean, valid nbgrader metadata, and they run with the references."""
import ast
import inspect

import nbclient
import nbformat
import pytest

from grader import chapters
from grader.grading.notebooks import ANSWER_PREFIX, CHECK_PREFIX, check_cells, exercise_id, grade_id, read_notebook
from notebook_builders import NOTEBOOKS, write_filled

ALL_NOTEBOOKS = sorted(NOTEBOOKS.glob("*.ipynb"))
REQUIRED_NBGRADER_KEYS = {"schema_version", "grade", "solution", "locked", "grade_id"}


def test_the_course_has_its_chapter_notebooks():
    assert {"00_guide.ipynb", "03_fx.ipynb"} <= {p.name for p in ALL_NOTEBOOKS}


@pytest.mark.parametrize("path", ALL_NOTEBOOKS, ids=lambda p: p.name)
def test_stored_without_outputs(path):
    for cell in read_notebook(path).cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None


@pytest.mark.parametrize("path", ALL_NOTEBOOKS, ids=lambda p: p.name)
def test_nbgrader_metadata_is_valid_and_matches_the_declarations(path):
    notebook = read_notebook(path)
    seen = set()
    for cell in notebook.cells:
        meta = cell.get("metadata", {}).get("nbgrader")
        if meta is None:
            continue
        assert REQUIRED_NBGRADER_KEYS <= set(meta) and meta["schema_version"] == 3
        assert meta["grade_id"] not in seen
        seen.add(meta["grade_id"])
        exercise = chapters.get(exercise_id(meta["grade_id"]))
        if meta["grade_id"].startswith(CHECK_PREFIX):
            assert meta["grade"] and meta["locked"] and not meta["solution"]
            assert meta["points"] == exercise.points
            assert cell.source.strip() == f'check("{exercise.id}")'
        else:
            assert meta["grade_id"].startswith(ANSWER_PREFIX) and meta["solution"] and not meta["grade"]


def parameter_names(arguments: ast.arguments) -> list[str]:
    """Every parameter of a ``def``, in signature order (``*args`` and ``**kwargs`` included)."""
    names = [a.arg for a in arguments.posonlyargs + arguments.args]
    names += [arguments.vararg.arg] if arguments.vararg else []
    names += [a.arg for a in arguments.kwonlyargs]
    return names + ([arguments.kwarg.arg] if arguments.kwarg else [])


@pytest.mark.parametrize("path", ALL_NOTEBOOKS, ids=lambda p: p.name)
def test_declares_every_exercise_of_its_chapter_in_order_with_matching_stubs(path):
    notebook = read_notebook(path)
    assert list(check_cells(notebook)) == [e.id for e in chapters.chapter(path.name[:2])]
    for cell in notebook.cells:
        if grade_id(cell).startswith(ANSWER_PREFIX):
            exercise = chapters.get(exercise_id(grade_id(cell)))
            stub = ast.parse(cell.source).body[0]
            assert stub.name == exercise.function
            assert parameter_names(stub.args) == list(inspect.signature(exercise.reference_function).parameters)


def test_every_chapter_module_has_its_notebook():
    assert set(chapters.chapter_modules()) == {path.name[:2] for path in ALL_NOTEBOOKS}


@pytest.mark.parametrize("path", ALL_NOTEBOOKS, ids=lambda p: p.name)
def test_runs_top_to_bottom_with_references(path, tmp_path):
    notebook = nbformat.read(write_filled(tmp_path / path.name, notebook_path=path), as_version=4)
    nbclient.NotebookClient(notebook, timeout=300, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}}).execute()
    errors = [o for c in notebook.cells for o in c.get("outputs", []) if o.output_type == "error"]
    assert errors == []
    checks = [c for c in notebook.cells if grade_id(c).startswith(CHECK_PREFIX)]
    assert all(any(o.get("data", {}).get("text/plain", "").startswith("√ 通过") for o in c.outputs) for c in checks)
