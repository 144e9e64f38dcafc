"""Calling a learner's function: the one place that turns a call into an outcome.

Self-study (``check()`` in the learner's kernel) and grading (the sandbox process) both
call :func:`call_learner`, which returns the outcome as bytes, and both read it back
with :func:`read_outcome`. So what a learner sees in the notebook went through exactly
the code that grading uses: the same exception handling, the same plain-data boundary,
the same deadline. The outcome is an :class:`~.outcome.Artifact` or a
:class:`~.outcome.Failure` (see :mod:`.outcome`).
"""
from __future__ import annotations

import contextlib
import importlib
import signal
import threading
import traceback
from typing import Callable

import cxx_toolchain

from .outcome import Artifact, Failure, FailureKind, from_plain, to_plain
from .plain_data import NotPlainData, dumps, loads, require_plain

MAX_ERROR_CHARS = 500
CASE_TIMEOUT_S = 60.0


def resolve(name: str):
    """``"package.module:attribute"`` → the object it names."""
    module_name, _, qualname = name.partition(":")
    value = importlib.import_module(module_name)
    for part in qualname.split("."):
        value = getattr(value, part)
    return value


def describe_exception(error: BaseException) -> str:
    """``TypeError（第 3 行：the line）：message``: the innermost line of learner code that
    raised it first, then the message, cut after a whole line or sentence if long."""
    frames = traceback.extract_tb(error.__traceback__)
    learner = [f for f in frames if "ipykernel" in f.filename or f.filename.startswith("<")]
    where = f"（第 {learner[-1].lineno} 行：{learner[-1].line}）" if learner and learner[-1].line else ""
    message = shortened(str(error), MAX_ERROR_CHARS)
    return f"{type(error).__name__}{where}" + (f"：{message}" if message else "")


def shortened(message: str, limit: int) -> str:
    """``message`` up to ``limit`` characters; a longer one ends after its last whole line or
    sentence within the limit (never mid-word), marked as cut."""
    message = message.strip()
    if len(message) <= limit:
        return message
    head = message[:limit]
    end = max(head.rfind("\n"), head.rfind(". "), head.rfind("。"))
    if end < limit // 3:
        end = head.rfind(" ")
    return head[:end + 1].rstrip() + " …（后面还有，已省略）"


class CaseTimeout(BaseException):
    """Raised into a self-study call that overran its deadline (BaseException, so that a
    learner's ``except Exception`` does not swallow it)."""


@contextlib.contextmanager
def deadline(seconds: float | None):
    """Interrupt the body after ``seconds`` (main thread only; elsewhere no deadline).

    The sandbox does not rely on this: its driver kills a process that overruns, which
    also stops code that swallows every exception.
    """
    if not seconds or threading.current_thread() is not threading.main_thread():
        yield
        return

    def expire(signum, frame):
        raise CaseTimeout

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _outcome(function: Callable | None, produce: Callable, built: dict, timeout_s: float | None) -> Artifact | Failure:
    if not callable(function):
        return Failure(FailureKind.MISSING)
    try:
        with deadline(timeout_s):
            return Artifact(produce(function, built))
    except NotImplementedError:
        return Failure(FailureKind.NOT_IMPLEMENTED)
    except CaseTimeout:
        return Failure(FailureKind.TIMEOUT, seconds=timeout_s)
    except BaseException as error:  # learner code may raise SystemExit, KeyboardInterrupt, ...
        if cxx_toolchain.compiler_missing(error):  # this machine's problem, said as such
            return Failure(FailureKind.ENVIRONMENT, cxx_toolchain.missing_message())
        return Failure(FailureKind.RAISED, describe_exception(error))


def call_learner(function: Callable | None, produce: Callable, built: dict, *,
                 timeout_s: float | None = CASE_TIMEOUT_S) -> bytes:
    """Call ``produce(function, built)`` and serialise the outcome as plain data."""
    outcome = _outcome(function, produce, built, timeout_s)
    try:
        if isinstance(outcome, Artifact):
            require_plain(outcome.value)  # names the offending value from the learner's view
        return dumps(to_plain(outcome))
    except NotPlainData as error:
        return dumps(to_plain(Failure(FailureKind.NOT_PLAIN, str(error))))


def call_analysis(analyze: Callable, artifact, built: dict) -> bytes:
    """``analyze(artifact, built)`` in the analysis process: its facts, made plain data like
    any outcome (the artifact came from learner code, so the analysis is confined too)."""
    return call_learner(analyze, lambda function, case: function(artifact, case), built, timeout_s=None)


def read_outcome(data: bytes) -> Artifact | Failure:
    """An outcome back from bytes that untrusted code may have written."""
    try:
        return from_plain(loads(data))
    except NotPlainData as error:
        return Failure(FailureKind.NOT_PLAIN, str(error))
