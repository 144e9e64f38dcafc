"""Results of running an exercise's cases: verdicts and points (their words: :mod:`.feedback`;
their JSON form: :mod:`.records`)."""
from __future__ import annotations

from dataclasses import dataclass, field

from ..authoring import Verdict


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
