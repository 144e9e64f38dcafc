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
from ..sandbox.outcome import Facts, Failure, Outcome
from .feedback import failure_message, unanswered_message, unjudgeable
from .results import CaseResult, ExerciseResult


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


def case_verdict(exercise: Exercise, planned: PlannedCase, outcome: Outcome) -> Verdict:
    """Compare the learner's facts with the reference's. An artifact that arrives here is
    analysed in this process: self-study's own kernel, or grading where the exercise's
    analysis is not confined (the harness has made the others :class:`Facts`)."""
    if isinstance(outcome, Failure):
        return Verdict(False, failure_message(outcome))
    expected = expected_facts(exercise, planned)
    try:
        got = outcome.value if isinstance(outcome, Facts) else exercise.analyze(outcome.value, planned.case.build())
        verdict = exercise.compare(expected, got)
        if verdict.ok and exercise.performance is not None:
            verdict = exercise.performance.judge(expected, got)
    except Exception as failure:  # a malformed artifact must never crash the batch
        verdict = Verdict(False, unjudgeable(f"{type(failure).__name__}: {failure}"))
    return verdict


def judge_exercise(exercise: Exercise, cases: list[PlannedCase], outcomes: list[Outcome]) -> ExerciseResult:
    """The result of one exercise from its cases' outcomes (in the same order)."""
    result = ExerciseResult(exercise.id, exercise.title, exercise.points, partial_credit=exercise.partial_credit)
    for planned, outcome in zip(cases, outcomes):
        if isinstance(outcome, Failure) and outcome.unanswered:
            result.error, result.cases, result.unanswered = unanswered_message(exercise, outcome), [], True
            break
        result.cases.append(CaseResult(planned.case.name, planned.hidden, case_verdict(exercise, planned, outcome)))
    return result
