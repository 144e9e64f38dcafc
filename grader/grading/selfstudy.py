"""``check("03.remove_dropout")``: the only code a notebook's check cell contains.

Self-study runs the exercise's public cases in the learner's own kernel, through the
same call and the same judge as grading, and shows the status: passed, not answered yet,
or wrong, as ordinary output (a coloured label in a notebook, plain text elsewhere): an
exercise still open is a state of the chapter, not an error. It never raises, so "Run
All" reaches the end of a chapter whose exercises are still open. Grading never relies
on this cell: the isolated harness (:mod:`.harness`) runs the public and hidden cases
where learner code cannot reach the verdict.
"""
from __future__ import annotations

import sys
from collections import Counter
from typing import Callable

from .. import chapters
from ..authoring import Exercise
from ..sandbox.calls import CASE_TIMEOUT_S, call_learner, read_outcome
from ..sandbox.outcome import Failure
from .feedback import HIDDEN_CASES_LATER, CheckReport, hint_later
from .judge import exercise_cases, judge_exercise
from .results import ExerciseResult

FAILURES_BEFORE_HINT = 2
failures: Counter = Counter()  # failed checks per exercise in this kernel session


def run_in_kernel(exercise: Exercise, function: Callable | None, *, include_hidden: bool, seed: int,
                  timeout_s: float | None = CASE_TIMEOUT_S) -> ExerciseResult:
    """All cases in this process (self-study and the grader's own tests; no isolation)."""
    cases = exercise_cases(exercise, include_hidden=include_hidden, seed=seed)
    outcomes = []
    for planned in cases:
        outcomes.append(read_outcome(call_learner(function, exercise.produce, planned.case.build(), timeout_s=timeout_s)))
        if isinstance(outcomes[-1], Failure) and outcomes[-1].unanswered:
            break  # the same for every case: no point in calling again
    return judge_exercise(exercise, cases[:len(outcomes)], outcomes)


def check(exercise_id: str, hint: bool = False, _caller_depth: int = 1) -> ExerciseResult:
    """Check the learner's answer to ``exercise_id`` on the public cases and show the status;
    the hint appears after a repeated failure, or at once with ``hint=True``."""
    exercise = chapters.get(exercise_id)
    function = sys._getframe(_caller_depth).f_globals.get(exercise.function)
    result = run_in_kernel(exercise, function, include_hidden=False, seed=0)
    if result.passed:
        show(CheckReport(result, exercise, notes=(HIDDEN_CASES_LATER,)))
        return result
    if not result.unanswered:
        failures[exercise.id] += 1
    show_hint = hint or failures[exercise.id] >= FAILURES_BEFORE_HINT
    notes = ()
    if exercise.hint and not show_hint and not result.unanswered:
        notes = (hint_later(exercise.id),)
    show(CheckReport(result, exercise, show_hint=show_hint, notes=notes))
    return result


def show(report: CheckReport) -> None:
    """In a notebook: rich output (label and text); elsewhere: the text on stdout."""
    from IPython import get_ipython
    from IPython.display import display

    if get_ipython() is not None:
        display(report)
    else:
        print(report.text)
