"""Graded results as JSON records (the JSON report, nbgrader's feedback, re-used records) and back.

A record keeps each case's verdict and message; a hidden case's never keeps expected and got values.
"""
from __future__ import annotations

from ..authoring import Verdict
from .feedback import NO_RESULT_RECORDED, reason
from .results import CaseResult, ExerciseResult


def _case_record(case: CaseResult) -> dict:
    record = {"case": case.case, "hidden": case.hidden, "passed": case.verdict.ok, "message": case.verdict.message}
    if not case.hidden:
        record.update(expected=case.verdict.expected, got=case.verdict.got)
    return record


def exercise_record(result: ExerciseResult) -> dict:
    return {
        "exercise": result.exercise_id,
        "title": result.title,
        "points": result.points,
        "max_points": result.max_points,
        "passed": result.passed,
        "partial_credit": result.partial_credit,
        "unanswered": result.unanswered,
        "reason": reason(result),
        "cases": [_case_record(c) for c in result.cases],
    }


def results_from_records(records: list[dict]) -> dict[str, ExerciseResult]:
    """ExerciseResults back from :func:`exercise_record` records (a saved report)."""
    results = {}
    for record in records:
        result = ExerciseResult(record["exercise"], record["title"], record["max_points"],
                                partial_credit=record.get("partial_credit", False),
                                unanswered=record.get("unanswered", False))
        for case in record["cases"]:
            verdict = Verdict(case["passed"], case.get("message", ""), case.get("expected"), case.get("got"))
            result.cases.append(CaseResult(case["case"], case["hidden"], verdict))
        if not result.cases:
            result.error = record["reason"] or NO_RESULT_RECORDED
        results[result.exercise_id] = result
    return results
