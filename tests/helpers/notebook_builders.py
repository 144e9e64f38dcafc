"""Build filled-in chapter notebooks for tests: references injected, optionally one wrong."""
import inspect
from pathlib import Path

import nbformat

from grader.notebooks import ANSWER_PREFIX, exercise_id, grade_id, inject_solutions, read_notebook

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
CHAPTER_03 = NOTEBOOKS / "03_fx.ipynb"


def wrong_answer_source(function, name: str) -> str:
    """Source defining ``name`` as the given (wrong) function, with its module's helpers."""
    return inspect.getsource(inspect.getmodule(function)) + f"\n{name} = {function.__name__}\n"


def write_filled(path: Path, notebook_path: Path = CHAPTER_03, overrides: dict | None = None) -> Path:
    """Write ``notebook_path`` with reference answers, or ``overrides[exercise_id]`` source."""
    notebook = inject_solutions(read_notebook(notebook_path))
    for cell in notebook.cells:
        identifier = grade_id(cell)
        if identifier.startswith(ANSWER_PREFIX) and exercise_id(identifier) in (overrides or {}):
            cell.source = overrides[exercise_id(identifier)]
    nbformat.write(notebook, path)
    return path


def write_answers_only(path: Path, answers: dict | None = None, extra_cells=(), edit=None,
                       notebook_path: Path = CHAPTER_03) -> Path:
    """A short submission: the chapter's import cell, its answer cells (references, or
    ``answers[exercise_id]`` source) and check cells; ``extra_cells`` are appended code,
    and ``edit(notebook)`` may tamper with it before it is written."""
    full = inject_solutions(read_notebook(notebook_path))
    imports = next(c for c in full.cells if c.cell_type == "code" and "import" in c.source)
    kept = [imports] + [c for c in full.cells if grade_id(c)]
    for cell in kept:
        identifier = grade_id(cell)
        if identifier.startswith(ANSWER_PREFIX) and exercise_id(identifier) in (answers or {}):
            cell.source = answers[exercise_id(identifier)]
    full.cells = kept + [nbformat.v4.new_code_cell(source) for source in extra_cells]
    if edit is not None:
        edit(full)
    nbformat.write(full, path)
    return path
