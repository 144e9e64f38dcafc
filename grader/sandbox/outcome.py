"""What one call of learner code came to: an artifact, facts, or a failure of a closed kind.

The sandbox makes outcomes (:mod:`.calls` for a call, :mod:`.driver` for a process that
failed a case), the grader's analysis step makes facts, grading reads them all. A call's
outcome leaves its process as plain data, and :func:`to_plain` and :func:`from_plain` are
the only places that know that form: what untrusted code wrote that is not an outcome
becomes a ``MALFORMED`` failure. The words a
learner reads about a failure are :mod:`grader.grading.feedback`'s, not these.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, Union


class FailureKind(enum.Enum):
    MISSING = "missing"                  # no function of that name: the exercise is unanswered
    NOT_IMPLEMENTED = "not_implemented"  # the stub still raises NotImplementedError: unanswered
    RAISED = "raised"                    # detail: the exception, at the learner's line
    NOT_PLAIN = "not_plain"              # detail: the value the plain-data boundary refused
    TIMEOUT = "timeout"                  # seconds: the limit it overran
    ENVIRONMENT = "environment"          # detail: what this machine lacks (a C++ compiler), not the learner's fault
    CRASHED = "crashed"                  # end: how the sandbox process ended during this case
    CRASHED_BEFORE = "crashed_before"    # end: how it ended before this case started (in the learner's cells)
    SKIPPED = "skipped"                  # end: how an earlier case of the same function ended the process
    NO_RESULT = "no_result"              # the process finished without writing this case's outcome
    MALFORMED = "malformed"              # what it wrote is not an outcome
    ANALYSIS = "analysis"                # cause: the failure of the artifact's confined analysis


UNANSWERED = frozenset({FailureKind.MISSING, FailureKind.NOT_IMPLEMENTED})


@dataclass(frozen=True)
class ProcessEnd:
    """How a sandbox process stopped before it finished: over its deadline, killed by a
    signal, or exited with a code (when neither, it was still running)."""

    timed_out: bool = False
    signal: str = ""
    exit_code: int | None = None


@dataclass(frozen=True)
class Artifact:
    """The function ran and returned ``value`` (plain data)."""

    value: Any


@dataclass(frozen=True)
class Facts:
    """An artifact already analysed (in the grader's confined analysis process)."""

    value: Any


@dataclass(frozen=True)
class Failure:
    kind: FailureKind
    detail: str = ""
    seconds: float = 0.0
    end: ProcessEnd | None = None
    cause: Failure | None = None

    @property
    def unanswered(self) -> bool:
        """No answer to judge (the same for every case of the exercise)."""
        return self.kind in UNANSWERED


Outcome = Union[Artifact, Facts, Failure]


# The failures a call can come to inside a sandbox process (the others are the trusted side's findings).
CALL_FAILURES = frozenset({FailureKind.MISSING, FailureKind.NOT_IMPLEMENTED, FailureKind.RAISED,
                           FailureKind.NOT_PLAIN, FailureKind.TIMEOUT, FailureKind.ENVIRONMENT})


def to_plain(outcome: Artifact | Failure) -> dict:
    """A call's outcome as plain data, to cross from the process that made the call."""
    if isinstance(outcome, Artifact):
        return {"artifact": outcome.value}
    return {"failure": outcome.kind.value, "detail": outcome.detail, "seconds": outcome.seconds}


def from_plain(record: Any) -> Artifact | Failure:
    """A call's outcome back from plain data that untrusted code may have written: an artifact,
    or one of the failures a call can come to; anything else is ``MALFORMED``."""
    if type(record) is dict and set(record) == {"artifact"}:
        return Artifact(record["artifact"])
    if type(record) is not dict or set(record) != {"failure", "detail", "seconds"}:
        return Failure(FailureKind.MALFORMED)
    kind = next((k for k in CALL_FAILURES if k.value == record["failure"]), None)
    detail, seconds = record["detail"], record["seconds"]
    if kind is None or type(detail) is not str or type(seconds) not in (int, float):
        return Failure(FailureKind.MALFORMED)
    return Failure(kind, detail, float(seconds))
