"""Results of running an exercise's cases, and their serialised form for JSON reports."""
from __future__ import annotations

from dataclasses import dataclass, field

from ..authoring import Verdict
from . import feedback


@dataclass
class CaseResult:
    case: str
    hidden: bool
    verdict: Verdict


@dataclass
class ExerciseResult:
    exercise_id: str
    title: str
    max_points: int
    cases: list[CaseResult] = field(default_factory=list)
    error: str | None = None     # the exercise could not be checked at all
    unanswered: bool = False      # ... because the function is missing or still the stub
    partial_credit: bool = False  # each passed case earns its share of the points

    @property
    def passed(self) -> bool:
        return self.error is None and bool(self.cases) and all(c.verdict.ok for c in self.cases)

    @property
    def points(self) -> float:
        if self.passed:
            return self.max_points
        if not self.partial_credit or self.error is not None or not self.cases:
            return 0
        return round(self.max_points * sum(c.verdict.ok for c in self.cases) / len(self.cases), 2)

    @property
    def reason(self) -> str:
        """One line: why it failed, or "" if passed (worded by :func:`.feedback.reason`)."""
        return feedback.reason(self)

    @staticmethod
    def _case_json(case: CaseResult) -> dict:
        """Hidden cases keep their verdict and message, never expected/got values."""
        record = {"case": case.case, "hidden": case.hidden, "passed": case.verdict.ok,
                  "message": case.verdict.message}
        if not case.hidden:
            record.update(expected=case.verdict.expected, got=case.verdict.got)
        return record

    def to_json(self) -> dict:
        return {
            "exercise": self.exercise_id,
            "title": self.title,
            "points": self.points,
            "max_points": self.max_points,
            "passed": self.passed,
            "partial_credit": self.partial_credit,
            "unanswered": self.unanswered,
            "reason": self.reason,
            "cases": [self._case_json(c) for c in self.cases],
        }


def results_from_json(records: list[dict]) -> dict[str, ExerciseResult]:
    """ExerciseResults back from :meth:`ExerciseResult.to_json` records (a saved report)."""
    results = {}
    for record in records:
        result = ExerciseResult(record["exercise"], record["title"], record["max_points"],
                                partial_credit=record.get("partial_credit", False),
                                unanswered=record.get("unanswered", False))
        for case in record["cases"]:
            verdict = Verdict(case["passed"], case.get("message", ""), case.get("expected"), case.get("got"))
            result.cases.append(CaseResult(case["case"], case["hidden"], verdict))
        if not result.cases:
            result.error = record["reason"] or feedback.NO_RESULT_RECORDED
        results[result.exercise_id] = result
    return results
