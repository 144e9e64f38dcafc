"""Turning a chapter notebook into nbgrader's source: reference solutions injected.

An answer cell of the source is the declaration's stub (signature and docstring) with the
reference's body between nbgrader's ``### BEGIN SOLUTION`` / ``### END SOLUTION`` markers,
which ``generate_assignment`` turns back into a stub for the release.
"""
from __future__ import annotations

import ast
import copy
import inspect
import textwrap

import nbformat

from .. import chapters
from ..authoring import Exercise
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


def _solution_source(exercise: Exercise) -> str:
    return "\n".join([exercise.stub, "    ### BEGIN SOLUTION", reference_body(exercise.reference_function),
                      "    ### END SOLUTION"])


def inject_solutions(notebook) -> nbformat.NotebookNode:
    """A copy whose answer cells hold the reference solutions between nbgrader markers."""
    filled = copy.deepcopy(notebook)
    for cell in filled.cells:
        if grade_id(cell).startswith(ANSWER_PREFIX):
            cell.source = _solution_source(chapters.get(exercise_id(grade_id(cell))))
    return filled


def strip_outputs(notebook) -> nbformat.NotebookNode:
    clean = copy.deepcopy(notebook)
    for cell in clean.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    return clean
