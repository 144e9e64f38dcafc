"""How an exercise is declared: cases, a reference, an artifact and a comparison.

The split mirrors where code runs:

- ``Case.build()`` makes the inputs (trusted side); they must be picklable, because they
  are shipped to the sandbox that runs learner code.
- ``produce(function, built)`` calls a function (the learner's, in the sandbox; the
  reference's, on the trusted side) and returns an *artifact*: plain data only — None,
  bool, int, float, str, lists/tuples, dicts with str keys, plain ``torch.Tensor``s.
  Anything else (custom classes, tensor subclasses, objects with a custom ``__eq__``)
  is refused when it crosses back.
- ``analyze(artifact, built)`` (optional) turns an artifact into facts, e.g. decodes a
  serialised graph and runs it on the case's inputs. What it runs came from learner code,
  so grading runs it in a confined process of its own; an analysis that only adds facts
  about the case (a measurement of Dynamo, the chip's clock) declares
  ``confine_analysis=False`` and runs on the trusted side, where it can be memoised.
- ``compare(expected_facts, got_facts)`` judges; ``performance`` compares a metric.

Cases come in three kinds. *Public* cases run in the notebook's check and in grading;
they reject the common misconceptions, so that a check that passes means the grade.
*Designed* hidden cases are fixed: each rejects mistakes that the public ones cannot
show, on every seed. *Random* hidden cases are drawn from the course's secret seed and
catch answers fitted to the cases a learner could guess.
"""
from __future__ import annotations

import ast
import random
from dataclasses import dataclass
from typing import Any, Callable

from ..sandbox.calls import resolve


@dataclass(frozen=True)
class Case:
    """One input to an exercise. ``build`` returns a fresh argument dict on every call,
    because passes mutate what they are given."""

    name: str
    build: Callable[[], dict]
    description: str = ""


@dataclass(frozen=True)
class Verdict:
    """The outcome of a comparison, with learner-facing Chinese text."""

    ok: bool
    message: str = ""
    expected: str | None = None
    got: str | None = None


PASS = Verdict(True)


@dataclass(frozen=True)
class PerformanceGoal:
    """``metric(got) <= max_ratio * metric(expected)``, e.g. node counts or simulated time."""

    metric: Callable[[Any], float]
    max_ratio: float
    description: str

    def judge(self, expected: Any, got: Any) -> Verdict:
        target, value = self.metric(expected), self.metric(got)
        if value <= self.max_ratio * target:
            return PASS
        return Verdict(False, f"性能未达标：{self.description}",
                       expected=f"≤ {self.max_ratio * target:g}", got=f"{value:g}")


def no_cases(*_: Any) -> list[Case]:
    """The default for an exercise without designed or random hidden cases."""
    return []


def keep_artifact(artifact: Any, built: dict) -> Any:
    """The default ``analyze``: the artifact already is the fact to compare."""
    return artifact


@dataclass(frozen=True)
class Exercise:
    """Everything the grader knows about one exercise, declared once in its chapter module."""

    id: str                      # "03.remove_dropout": chapter, dot, name
    title: str                   # Chinese, shown in feedback
    # The answer cell's ``def`` line and docstring; the notebook's answer cell is this stub
    # and a ``raise NotImplementedError`` (python -m grader lint writes it there).
    stub: str
    points: int
    public_cases: Callable[[], list[Case]]
    produce: Callable[[Callable, dict], Any]
    compare: Callable[[Any, Any], Verdict]
    designed_cases: Callable[[], list[Case]] = no_cases
    random_cases: Callable[[random.Random], list[Case]] = no_cases
    hint: str = ""
    performance: PerformanceGoal | None = None
    analyze: Callable[[Any, dict], Any] = keep_artifact
    # False: analyze runs nothing the artifact describes (it reads it as data), so the
    # grader may call it in its own process instead of starting a confined one.
    confine_analysis: bool = True
    # "package.module:function"; the chapter catalog fills in solutions.<chapter module>:<function>.
    reference: str = ""
    # Each passed case earns its share of the points; False only where cases depend on
    # each other (one answer decides them all).
    partial_credit: bool = True

    def __post_init__(self):
        body = ast.parse(self.stub).body
        if not (len(body) == 1 and isinstance(body[0], ast.FunctionDef) and ast.get_docstring(body[0])
                and len(body[0].body) == 1):
            raise ValueError(f"{self.id}: stub must be one def with a docstring and nothing else")

    @property
    def chapter(self) -> str:
        return self.id.split(".", 1)[0]

    @property
    def function(self) -> str:
        """The name the learner defines in the answer cell (the stub's ``def``)."""
        return ast.parse(self.stub).body[0].name

    @property
    def analysis_confined(self) -> bool:
        """Whether grading analyses this exercise's artifacts in a confined process of their own
        (the one place that decides it: an analysis that runs what the artifact describes)."""
        return self.analyze is not keep_artifact and self.confine_analysis

    @property
    def reference_function(self) -> Callable:
        """The reference implementation (trusted side only: the sandbox cannot see it)."""
        return resolve(self.reference)

    @property
    def produce_name(self) -> str:
        """Where the sandbox finds ``produce``: it must be a module-level function."""
        return self._importable(self.produce, "produce")

    @property
    def analyze_name(self) -> str:
        """Where the analysis process finds ``analyze`` (also module-level)."""
        return self._importable(self.analyze, "analyze")

    def _importable(self, function: Callable, role: str) -> str:
        name = f"{function.__module__}:{function.__qualname__}"
        if "<" in name:
            raise ValueError(f"{self.id}: {role} must be a module-level function, not {name}")
        return name
