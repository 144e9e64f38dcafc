"""Results of running an exercise's cases, and their serialised form for JSON reports."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

from .exercise import Verdict


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

    @property
    def passed(self) -> bool:
        return self.error is None and bool(self.cases) and all(c.verdict.ok for c in self.cases)

    @property
    def points(self) -> int:
        return self.max_points if self.passed else 0

    @property
    def reason(self) -> str:
        """One line: why it failed (hidden cases without their inputs), or "" if passed."""
        if self.error is not None:
            return self.error
        for case in self.cases:
            if not case.verdict.ok:
                where = "隐藏用例" if case.hidden else f"用例「{case.case}」"
                return f"{where}：{case.verdict.message}"
        return ""

    def to_json(self) -> dict:
        return {
            "exercise": self.exercise_id,
            "title": self.title,
            "points": self.points,
            "max_points": self.max_points,
            "passed": self.passed,
            "reason": self.reason,
            "cases": [
                {"case": c.case, "hidden": c.hidden, "passed": c.verdict.ok,
                 **({} if c.hidden else {k: v for k, v in asdict(c.verdict).items() if k != "ok"})}
                for c in self.cases
            ],
        }
