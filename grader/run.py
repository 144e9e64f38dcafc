"""Run an exercise's cases against a learner's function and the reference."""
from __future__ import annotations

import random
import traceback
from typing import Callable

from .exercise import Exercise, Verdict
from .results import CaseResult, ExerciseResult


def _describe_exception(error: BaseException) -> str:
    """``TypeError: ...`` plus the innermost line of learner code that raised it."""
    frames = traceback.extract_tb(error.__traceback__)
    learner = [f for f in frames if "ipykernel" in f.filename or f.filename.startswith("<")]
    where = f"（第 {learner[-1].lineno} 行：{learner[-1].line}）" if learner and learner[-1].line else ""
    return f"{type(error).__name__}: {error}{where}"


def run_exercise(exercise: Exercise, function: Callable, *, include_hidden: bool,
                 seed: int) -> ExerciseResult:
    """Every public case (and, when grading, every hidden case) of ``exercise``."""
    result = ExerciseResult(exercise.id, exercise.title, exercise.points)
    cases = [(case, False) for case in exercise.public_cases()]
    if include_hidden:
        cases += [(case, True) for case in exercise.hidden_cases(random.Random(seed))]
    for case, hidden in cases:
        expected = exercise.analyze(exercise.produce(exercise.reference_function, case.build()), case.build())
        try:
            got = exercise.analyze(exercise.produce(function, case.build()), case.build())
        except NotImplementedError:
            result.error = f"函数 {exercise.function} 还没有实现（抛出了 NotImplementedError）。"
            return result
        except Exception as error:  # learner code may raise anything
            verdict = Verdict(False, f"你的函数抛出了异常 {_describe_exception(error)}")
        else:
            verdict = exercise.compare(expected, got)
            if verdict.ok and exercise.performance is not None:
                verdict = exercise.performance.judge(expected, got)
        result.cases.append(CaseResult(case.name, hidden, verdict))
    return result
