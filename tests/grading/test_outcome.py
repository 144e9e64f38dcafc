"""Outcomes: a closed set of failures, one plain form across processes, words for every kind."""
import pytest

from grader.grading.feedback import failure_message
from grader.sandbox.outcome import (CALL_FAILURES, Artifact, Failure, FailureKind, ProcessEnd, from_plain,
                                    to_plain)


@pytest.mark.parametrize("outcome", [Artifact({"counts": [1, 2]}), Artifact(None)]
                         + [Failure(kind, "detail", 1.5) for kind in sorted(CALL_FAILURES, key=lambda k: k.value)],
                         ids=repr)
def test_a_call_s_outcome_survives_its_plain_form(outcome):
    assert from_plain(to_plain(outcome)) == outcome


@pytest.mark.parametrize("record", [
    None, [], "artifact", {}, {"artifact": 1, "extra": 2}, {"failure": "raised"},
    {"failure": "no_such_kind", "detail": "", "seconds": 0},
    {"failure": "crashed", "detail": "", "seconds": 0},       # the trusted side's finding, not a call's
    {"failure": "analysis", "detail": "", "seconds": 0},
    {"failure": "raised", "detail": 3, "seconds": 0},
    {"failure": "timeout", "detail": "", "seconds": "60"},
], ids=repr)
def test_anything_else_untrusted_code_writes_is_malformed(record):
    assert from_plain(record) == Failure(FailureKind.MALFORMED)


def test_an_analysis_that_raises_not_implemented_is_worded_as_the_analysis_failing():
    failure = Failure(FailureKind.ANALYSIS, cause=Failure(FailureKind.NOT_IMPLEMENTED))
    assert failure_message(failure) == "分析你的返回值时失败：抛出了 NotImplementedError。"


def test_only_a_missing_function_or_the_stub_leave_an_exercise_unanswered():
    assert {kind for kind in FailureKind if Failure(kind).unanswered} == {FailureKind.MISSING,
                                                                           FailureKind.NOT_IMPLEMENTED}


@pytest.mark.parametrize("kind", list(FailureKind), ids=lambda k: k.value)
def test_every_failure_has_words_for_the_learner(kind):
    failure = Failure(kind, "（细节）", 2.0, end=ProcessEnd(signal="SIGKILL"), cause=Failure(FailureKind.RAISED, "E"))
    words = failure_message(failure)
    assert words and "{" not in words and kind.value not in words
