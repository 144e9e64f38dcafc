"""Judging: a case's outcome becomes a verdict, an exercise's verdicts become its result.

Self-study (:mod:`.selfstudy`) and grading (:mod:`.harness`) obtain outcomes in
different processes but through the same call (:func:`grader.sandbox.calls.call_learner`)
and judge them here, with the same messages, so both decide alike.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from ..authoring import Case, Exercise, Verdict
from .results import CaseResult, ExerciseResult

ALLOWED_DATA = ("None、bool、int、float、str、bytes、list、tuple、键为 str 的 dict、CPU 上的普通 torch.Tensor"
                "（NumPy 的数请先用 int(x)、float(x) 转换，Counter 等 dict 的子类请用 dict(...) 转换）")
EXERCISE_LEVEL_ERRORS = ("missing", "not_implemented")


@dataclass(frozen=True)
class PlannedCase:
    """A case as one run of an exercise meets it: hidden or public, and for a random case
    the seed it was drawn with (None: the same case on every seed)."""

    case: Case
    hidden: bool
    seed: int | None = None


def exercise_cases(exercise: Exercise, *, include_hidden: bool, seed: int) -> list[PlannedCase]:
    """The public cases, then the designed hidden ones, then the random ones drawn with ``seed``."""
    cases = [PlannedCase(case, False) for case in exercise.public_cases()]
    if include_hidden:
        cases += [PlannedCase(case, True) for case in exercise.designed_cases()]
        cases += [PlannedCase(case, True, seed) for case in exercise.random_cases(random.Random(seed))]
    return cases


_expected: dict[tuple, Any] = {}


def expected_facts(exercise: Exercise, planned: PlannedCase) -> Any:
    """What the reference produces on a case, analysed (trusted side only).

    Kept for the life of the process: a batch worker grades many submissions on the same
    cases (a case is determined by its name, and a random one by its seed too), and
    comparisons only read the facts.
    """
    key = (exercise.id, planned.case.name, planned.hidden, planned.seed)
    if key not in _expected:
        case = planned.case
        _expected[key] = exercise.analyze(exercise.produce(exercise.reference_function, case.build()), case.build())
    return _expected[key]


def exercise_error(exercise: Exercise, kind: str) -> str:
    """Why a whole exercise could not be checked (no function, or still the stub)."""
    if kind == "not_implemented":
        return f"函数 {exercise.function} 还没有实现（抛出了 NotImplementedError）。"
    return f"没有找到函数 {exercise.function}：答案单元格还没有运行，或者运行时出错、没有定义它。"


def failure_message(outcome: dict) -> str:
    """Learner-facing text for an outcome that carries no artifact."""
    kind, detail = outcome["error"], outcome.get("detail", "")
    if kind == "raised":
        return f"你的函数抛出了异常 {detail}"
    if kind == "not_plain":
        return f"你的函数返回了评分无法接受的值：{detail}。只接受普通数据：{ALLOWED_DATA}。"
    if kind == "timeout":
        return f"你的函数在这个用例上超时（时限 {outcome['seconds']:g} 秒）。"
    if kind == "no_result":
        return "沙箱没有写出这个用例的结果。"
    if kind == "malformed":
        return "沙箱写出的结果格式不对。"
    if kind == "analysis":
        return detail
    return detail or f"没有结果（{kind}）。"


def case_verdict(exercise: Exercise, planned: PlannedCase, outcome: dict) -> Verdict:
    """Analyse a learner's artifact (unless the grader's analysis process already did:
    ``facts``) and compare it with the reference's facts."""
    if "error" in outcome:
        return Verdict(False, failure_message(outcome))
    expected = expected_facts(exercise, planned)
    try:
        got = outcome["facts"] if "facts" in outcome else exercise.analyze(outcome["artifact"], planned.case.build())
        verdict = exercise.compare(expected, got)
        if verdict.ok and exercise.performance is not None:
            verdict = exercise.performance.judge(expected, got)
    except Exception as failure:  # a malformed artifact must never crash the batch
        verdict = Verdict(False, f"返回值无法评分（{type(failure).__name__}: {failure}）。")
    return verdict


def judge_exercise(exercise: Exercise, cases: list[PlannedCase], outcomes: list[dict]) -> ExerciseResult:
    """The result of one exercise from its cases' outcomes (in the same order)."""
    result = ExerciseResult(exercise.id, exercise.title, exercise.points, partial_credit=exercise.partial_credit)
    for planned, outcome in zip(cases, outcomes):
        if outcome.get("error") in EXERCISE_LEVEL_ERRORS:
            result.error, result.cases, result.unanswered = exercise_error(exercise, outcome["error"]), [], True
            break
        result.cases.append(CaseResult(planned.case.name, planned.hidden, case_verdict(exercise, planned, outcome)))
    return result
