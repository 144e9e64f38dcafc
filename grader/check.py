"""``check("03.remove_dropout")``: the only code a notebook's check cell contains.

Self-study: runs the exercise's public cases in the learner's own kernel and prints
Chinese feedback; a failure raises :class:`ExerciseFailed`, which IPython shows as the
feedback alone, without a traceback. Grading never relies on this cell: the isolated
harness (:mod:`grader.harness`) runs the public and hidden cases where learner code
cannot reach the verdict.
"""
from __future__ import annotations

import sys

from .exercises import load as load_exercises
from .feedback import format_result
from .results import ExerciseResult
from .run import run_exercise

REGISTRY = load_exercises()


class ExerciseFailed(AssertionError):
    """Raised by a failing check cell; rendered in Jupyter as the feedback alone."""

    def _render_traceback_(self):
        return [str(self)]


def check(exercise_id: str, _caller_depth: int = 1) -> None:
    """Check the learner's answer to ``exercise_id`` on the public cases."""
    exercise = REGISTRY.get(exercise_id)
    function = sys._getframe(_caller_depth).f_globals.get(exercise.function)
    if not callable(function):
        result = ExerciseResult(exercise.id, exercise.title, exercise.points,
                                error=f"没有找到函数 {exercise.function}：请先运行上面的答案单元格。")
    else:
        result = run_exercise(exercise, function, include_hidden=False, seed=0)
    text = format_result(result, exercise)
    if not result.passed:
        raise ExerciseFailed(text)
    print(text + "\n（隐藏用例只在评分时运行。）")
