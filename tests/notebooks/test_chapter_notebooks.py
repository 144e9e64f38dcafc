"""Chapter notebooks: stored clean, and they run with the references (their graded cells agree with
the declarations: tests/grading/test_lint.py)."""
import nbclient
import nbformat
import pytest

from grader.grading.notebooks import CHECK_PREFIX, grade_id, read_notebook
from notebook_builders import NOTEBOOKS, write_filled

ALL_NOTEBOOKS = sorted(NOTEBOOKS.glob("*.ipynb"))


def test_the_course_has_its_chapter_notebooks():
    assert {"00_guide.ipynb", "03_fx.ipynb"} <= {p.name for p in ALL_NOTEBOOKS}


@pytest.mark.parametrize("path", ALL_NOTEBOOKS, ids=lambda p: p.name)
def test_stored_without_outputs(path):
    for cell in read_notebook(path).cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None


@pytest.mark.parametrize("path", ALL_NOTEBOOKS, ids=lambda p: p.name)
def test_runs_top_to_bottom_with_references(path, tmp_path):
    notebook = nbformat.read(write_filled(tmp_path / path.name, notebook_path=path), as_version=4)
    nbclient.NotebookClient(notebook, timeout=300, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}}).execute()
    errors = [o for c in notebook.cells for o in c.get("outputs", []) if o.output_type == "error"]
    assert errors == []
    checks = [c for c in notebook.cells if grade_id(c).startswith(CHECK_PREFIX)]
    assert all(any(o.get("data", {}).get("text/plain", "").startswith("√ 通过") for o in c.outputs) for c in checks)
