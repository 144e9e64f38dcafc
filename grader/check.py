"""``check("03.remove_dropout")``: the only code a notebook's check cell contains.

Self-study: runs the public cases and prints Chinese feedback. Under ``python -m grader``
or ``nbgrader autograde`` (``COURSE_GRADER_MODE=grade``) hidden cases run too, and the
result is appended to the JSON-lines file named by ``COURSE_GRADER_RESULTS``. A failure
raises :class:`ExerciseFailed`, which is how nbgrader learns the cell scored 0; IPython
shows it as the feedback text, without a traceback.
"""
from __future__ import annotations

import json
import os
import random
import sys

from .exercises import load as load_exercises
from .feedback import format_result
from .results import ExerciseResult
from .run import run_exercise

REGISTRY = load_exercises()

MODE_VARIABLE = "COURSE_GRADER_MODE"
SEED_VARIABLE = "COURSE_GRADER_SEED"
RESULTS_VARIABLE = "COURSE_GRADER_RESULTS"


class ExerciseFailed(AssertionError):
    """Raised by a failing check cell; rendered in Jupyter as the feedback alone."""

    def _render_traceback_(self):
        return [str(self)]


def _learner_namespace(depth: int) -> dict:
    """Globals of the notebook (or script) that called ``check``, ``depth`` frames up."""
    return sys._getframe(depth + 1).f_globals


def _record(result: ExerciseResult) -> None:
    path = os.environ.get(RESULTS_VARIABLE)
    if path:
        with open(path, "a", encoding="utf-8") as results:
            results.write(json.dumps(result.to_json(), ensure_ascii=False) + "\n")


def check(exercise_id: str, _caller_depth: int = 1) -> None:
    """Check the learner's answer to ``exercise_id``; hidden cases run when grading."""
    exercise = REGISTRY.get(exercise_id)
    grading = os.environ.get(MODE_VARIABLE) == "grade"
    function = _learner_namespace(_caller_depth).get(exercise.function)
    if not callable(function):
        result = ExerciseResult(exercise.id, exercise.title, exercise.points,
                                error=f"没有找到函数 {exercise.function}：请先运行上面的答案单元格。")
    else:
        seed = int(os.environ.get(SEED_VARIABLE) or random.randrange(2**31))
        result = run_exercise(exercise, function, include_hidden=grading, seed=seed)
    text = format_result(result, exercise)
    _record(result)
    if not result.passed:
        raise ExerciseFailed(text)
    if not grading:
        text += "\n（隐藏用例只在评分时运行。）"
    print(text)
