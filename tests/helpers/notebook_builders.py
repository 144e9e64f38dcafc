"""Build filled-in chapter notebooks for tests: references injected, optionally one wrong."""
import inspect
from pathlib import Path

import nbformat

from grader.grading.notebooks import ANSWER_PREFIX, exercise_id, grade_id, read_notebook
from grader.instructor.release import inject_solutions
from mutants import written_out

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
CHAPTER_03 = NOTEBOOKS / "03_fx.ipynb"


def wrong_answer_source(function, name: str) -> str:
    """Source defining ``name`` as the given (wrong) function: its ``answers_chNN`` module's
    source, mutants written out (self-contained), or an import for a course library function."""
    module = inspect.getmodule(function)
    if not module.__name__.startswith("answers_ch"):
        return f"from {module.__name__} import {function.__name__} as {name}\n"
    return written_out(module) + f"\n{name} = {function.__name__}\n"


def write_filled(path: Path, notebook_path: Path = CHAPTER_03, overrides: dict | None = None) -> Path:
    """Write ``notebook_path`` with reference answers, or ``overrides[exercise_id]`` source."""
    notebook = inject_solutions(read_notebook(notebook_path))
    for cell in notebook.cells:
        identifier = grade_id(cell)
        if identifier.startswith(ANSWER_PREFIX) and exercise_id(identifier) in (overrides or {}):
            cell.source = overrides[exercise_id(identifier)]
    nbformat.write(notebook, path)
    return path


def answers_only(notebook_path: Path, answers: dict | None = None) -> nbformat.NotebookNode:
    """A short submission: the chapter's import cell, its answer cells (references, or
    ``answers[exercise_id]`` source) and its check cells."""
    full = inject_solutions(read_notebook(notebook_path))
    imports = next(c for c in full.cells if c.cell_type == "code" and "import" in c.source)
    full.cells = [imports] + [c for c in full.cells if grade_id(c)]
    for cell in full.cells:
        identifier = grade_id(cell)
        if identifier.startswith(ANSWER_PREFIX) and exercise_id(identifier) in (answers or {}):
            cell.source = answers[exercise_id(identifier)]
    return full


def write_answers_only(path: Path, answers: dict | None = None, extra_cells=(), edit=None,
                       notebook_path: Path = CHAPTER_03) -> Path:
    """:func:`answers_only` written to ``path``; ``extra_cells`` are appended code, and
    ``edit(notebook)`` may tamper with it before it is written."""
    notebook = answers_only(notebook_path, answers)
    notebook.cells += [nbformat.v4.new_code_cell(source) for source in extra_cells]
    if edit is not None:
        edit(notebook)
    nbformat.write(notebook, path)
    return path
