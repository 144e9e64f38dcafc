"""Removing the outputs of exercise cells: a blank run's "not answered" (还没有作答) says nothing to a reader."""
from __future__ import annotations

from grader.grading.notebooks import is_exercise_cell


def without_exercise_outputs(notebook):
    """``notebook`` with its answer and check cells' outputs and execution counts cleared (in place)."""
    for cell in notebook.cells:
        if cell.cell_type == "code" and is_exercise_cell(cell):
            cell.outputs = []
            cell.execution_count = None
    return notebook
