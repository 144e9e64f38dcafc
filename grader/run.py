"""Run an exercise's cases: the pieces shared by self-study checks and the isolated harness."""
from __future__ import annotations

import random
import traceback
from typing import Any, Callable

from .exercise import Case, Exercise, Verdict
from .results import CaseResult, ExerciseResult

MAX_ERROR_CHARS = 500


def describe_exception(error: BaseException) -> str:
    """``TypeError: ...`` plus the innermost line of learner code that raised it."""
    frames = traceback.extract_tb(error.__traceback__)
    learner = [f for f in frames if "ipykernel" in f.filename or f.filename.startswith("<")]
    where = f"（第 {learner[-1].lineno} 行：{learner[-1].line}）" if learner and learner[-1].line else ""
    return f"{type(error).__name__}: {error}"[:MAX_ERROR_CHARS] + where


def not_implemented(exercise: Exercise) -> str:
    return f"函数 {exercise.function} 还没有实现（抛出了 NotImplementedError）。"


def exercise_cases(exercise: Exercise, *, include_hidden: bool, seed: int) -> list[tuple[Case, bool]]:
    """(case, hidden) pairs: the public cases, then the hidden ones drawn with ``seed``."""
    cases = [(case, False) for case in exercise.public_cases()]
    if include_hidden:
        cases += [(case, True) for case in exercise.hidden_cases(random.Random(seed))]
    return cases


def expected_facts(exercise: Exercise, case: Case) -> Any:
    """What the reference produces on ``case``, analysed (trusted side only)."""
    return exercise.analyze(exercise.produce(exercise.reference_function, case.build()), case.build())


def judge(exercise: Exercise, expected: Any, artifact: Any, built: dict) -> Verdict:
    """Analyse a learner's artifact and compare it with the reference's facts."""
    got = exercise.analyze(artifact, built)
    verdict = exercise.compare(expected, got)
    if verdict.ok and exercise.performance is not None:
        verdict = exercise.performance.judge(expected, got)
    return verdict


def run_exercise(exercise: Exercise, function: Callable, *, include_hidden: bool,
                 seed: int) -> ExerciseResult:
    """All cases in this process (self-study and the grader's own tests; no isolation)."""
    result = ExerciseResult(exercise.id, exercise.title, exercise.points)
    for case, hidden in exercise_cases(exercise, include_hidden=include_hidden, seed=seed):
        expected = expected_facts(exercise, case)
        try:
            artifact = exercise.produce(function, case.build())
        except NotImplementedError:
            result.error = not_implemented(exercise)
            return result
        except Exception as error:  # learner code may raise anything
            verdict = Verdict(False, f"你的函数抛出了异常 {describe_exception(error)}")
        else:
            verdict = judge(exercise, expected, artifact, case.build())
        result.cases.append(CaseResult(case.name, hidden, verdict))
    return result
