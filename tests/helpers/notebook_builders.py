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
