"""Reading notebooks safely, finding their graded cells, and what those cells must hold.

Cell conventions (every chapter): an answer cell has nbgrader metadata
``solution: true`` and ``grade_id: "answer-03-remove_dropout"`` and holds the declaration's
stub ending in ``raise NotImplementedError(...)``; its check cell has ``grade: true``,
``grade_id: "check-03-remove_dropout"`` and holds only ``check("03.remove_dropout")``.
:func:`answer_cell` and :func:`check_cell` make both from the declaration.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

# jsonschema compiles about 40 grammars at import when the optional ``rfc3987_syntax`` is
# installed (2.8 s, paid by every grading run); notebook schemas use no IRI formats, so
# the grader imports nbformat without it.
sys.modules.setdefault("rfc3987_syntax", None)
import nbformat  # noqa: E402

from .. import chapters
from ..authoring import Exercise
from ..errors import GraderError

ANSWER_PREFIX, CHECK_PREFIX = "answer-", "check-"


def read_notebook(path) -> nbformat.NotebookNode:
    """The notebook at ``path``, or a :class:`GraderError` saying what is wrong with it."""
    path = Path(path)
    if not path.is_file():
        raise GraderError(f"no such notebook: {path}")
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as error:
        raise GraderError(f"{path} is not UTF-8 text (byte {error.start}); save the notebook again from Jupyter") from None
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as error:
        raise GraderError(f"{path} is not valid notebook JSON (line {error.lineno}, column {error.colno}: {error.msg})") from None
    if not isinstance(raw, dict) or "cells" not in raw:
        raise GraderError(f"{path} is JSON but not a Jupyter notebook (no 'cells')")
    if raw.get("nbformat") != 4:
        raise GraderError(f"{path} has nbformat {raw.get('nbformat')!r}; only version 4 notebooks are supported")
    try:
        notebook = nbformat.reads(text, as_version=nbformat.NO_CONVERT)
        nbformat.validate(notebook)
    except nbformat.ValidationError as error:
        raise GraderError(f"{path} is not a valid notebook: {error.message}") from None
    return notebook


def grade_id(cell) -> str:
    return cell.get("metadata", {}).get("nbgrader", {}).get("grade_id", "")


def is_exercise_cell(cell) -> bool:
    """An answer or a check cell (by its nbgrader grade id)."""
    return grade_id(cell).startswith((ANSWER_PREFIX, CHECK_PREFIX))


def named_exercises(notebook) -> set[str]:
    """The exercise ids that the notebook's answer and check cells name (declared or not)."""
    return {exercise_id(grade_id(cell)) for cell in notebook.cells if is_exercise_cell(cell)}


def exercise_id(cell_grade_id: str) -> str:
    """``check-03-remove_dropout`` → ``03.remove_dropout``."""
    for prefix in (ANSWER_PREFIX, CHECK_PREFIX):
        if cell_grade_id.startswith(prefix):
            chapter, _, name = cell_grade_id[len(prefix):].partition("-")
            return f"{chapter}.{name}"
    raise GraderError(f"grade_id {cell_grade_id!r} follows neither 'answer-CH-NAME' nor 'check-CH-NAME'")


def cell_grade_id(prefix: str, identifier: str) -> str:
    """``("check-", "03.remove_dropout")`` → ``check-03-remove_dropout`` (nbgrader ids have no dots)."""
    return prefix + identifier.replace(".", "-", 1)


def answer_cell(exercise: Exercise) -> nbformat.NotebookNode:
    """The answer cell as the learner first sees it: the stub, and a raise that reads as unanswered."""
    source = f'{exercise.stub}\n    raise NotImplementedError("练习 {exercise.id}：请在这里实现")'
    return nbformat.v4.new_code_cell(source, metadata={"nbgrader": {
        "grade": False, "grade_id": cell_grade_id(ANSWER_PREFIX, exercise.id), "locked": False,
        "schema_version": 3, "solution": True}})


def check_cell(exercise: Exercise) -> nbformat.NotebookNode:
    """The check cell: one call, locked, worth the declared points."""
    return nbformat.v4.new_code_cell(f'check("{exercise.id}")', metadata={"nbgrader": {
        "grade": True, "grade_id": cell_grade_id(CHECK_PREFIX, exercise.id), "locked": True,
        "points": exercise.points, "schema_version": 3, "solution": False}})


def check_cells(notebook) -> dict[str, dict]:
    """Graded check cells by exercise id; every id must be a declared exercise."""
    cells = {}
    for cell in notebook.cells:
        if cell.get("metadata", {}).get("nbgrader", {}).get("grade") and grade_id(cell).startswith(CHECK_PREFIX):
            identifier = exercise_id(grade_id(cell))
            chapters.get(identifier)
            cells[identifier] = cell
    if not cells:
        raise GraderError("the notebook has no graded cells (no cell with nbgrader grade_id 'check-…')")
    return cells

