"""Reading notebooks safely, finding their graded cells, and injecting reference solutions.

Cell conventions (every chapter): an answer cell has nbgrader metadata
``solution: true`` and ``grade_id: "answer-03-remove_dropout"`` and holds a stub ending in
``raise NotImplementedError(...)``; its check cell has ``grade: true``,
``grade_id: "check-03-remove_dropout"`` and holds only ``check("03.remove_dropout")``.
"""
from __future__ import annotations

import ast
import copy
import inspect
import json
import textwrap
from pathlib import Path

import nbformat

from .errors import GraderError
from .exercise import Exercise
from .exercises import load as load_exercises

REGISTRY = load_exercises()

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


def exercise_id(cell_grade_id: str) -> str:
    """``check-03-remove_dropout`` → ``03.remove_dropout``."""
    for prefix in (ANSWER_PREFIX, CHECK_PREFIX):
        if cell_grade_id.startswith(prefix):
            chapter, _, name = cell_grade_id[len(prefix):].partition("-")
            return f"{chapter}.{name}"
    raise GraderError(f"grade_id {cell_grade_id!r} follows neither 'answer-CH-NAME' nor 'check-CH-NAME'")


def check_cells(notebook) -> dict[str, dict]:
    """Graded check cells by exercise id; every id must be a declared exercise."""
    cells = {}
    for cell in notebook.cells:
        if cell.get("metadata", {}).get("nbgrader", {}).get("grade") and grade_id(cell).startswith(CHECK_PREFIX):
            identifier = exercise_id(grade_id(cell))
            REGISTRY.get(identifier)
            cells[identifier] = cell
    if not cells:
        raise GraderError("the notebook has no graded cells (no cell with nbgrader grade_id 'check-…')")
    return cells


def reference_body(function) -> str:
    """Source of ``function``'s body without its docstring, indented by four spaces."""
    source = textwrap.dedent(inspect.getsource(function))
    definition = ast.parse(source).body[0]
    body = definition.body
    if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant):
        body = body[1:]
    lines = source.splitlines()[body[0].lineno - 1:definition.end_lineno]
    return textwrap.indent(textwrap.dedent("\n".join(lines)), "    ")


def _solution_source(stub: str, exercise: Exercise) -> str:
    lines = stub.rstrip().splitlines()
    if not lines or not lines[-1].strip().startswith("raise NotImplementedError"):
        raise GraderError(f"answer cell of {exercise.id} must end with 'raise NotImplementedError(...)'")
    return "\n".join(lines[:-1] + ["    ### BEGIN SOLUTION", reference_body(exercise.reference_function),
                                   "    ### END SOLUTION"])


def inject_solutions(notebook) -> nbformat.NotebookNode:
    """A copy whose answer cells hold the reference solutions between nbgrader markers."""
    filled = copy.deepcopy(notebook)
    for cell in filled.cells:
        if grade_id(cell).startswith(ANSWER_PREFIX):
            cell.source = _solution_source(cell.source, REGISTRY.get(exercise_id(grade_id(cell))))
    return filled


def strip_outputs(notebook) -> nbformat.NotebookNode:
    clean = copy.deepcopy(notebook)
    for cell in clean.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    return clean
