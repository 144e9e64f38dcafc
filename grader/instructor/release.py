"""Turning a chapter notebook into nbgrader's source: reference solutions injected.

Answer cells hold a stub ending in ``raise NotImplementedError(...)``; the source keeps
the stub's signature and docstring and puts the reference's body between nbgrader's
``### BEGIN SOLUTION`` / ``### END SOLUTION`` markers, which ``generate_assignment``
turns back into a stub for the release.
"""
from __future__ import annotations

import ast
import copy
import inspect
import textwrap

import nbformat

from .. import chapters
from ..authoring import Exercise
from ..errors import GraderError
from ..grading.notebooks import ANSWER_PREFIX, exercise_id, grade_id


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
            cell.source = _solution_source(cell.source, chapters.get(exercise_id(grade_id(cell))))
    return filled


def strip_outputs(notebook) -> nbformat.NotebookNode:
    clean = copy.deepcopy(notebook)
    for cell in clean.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    return clean
