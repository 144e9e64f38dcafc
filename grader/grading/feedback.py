"""Learner-facing feedback, in Chinese: the status, which case failed, expected vs got, a hint.

Hidden cases are reported as pass/fail only: their inputs never appear. The hint names
the approach, so self-study shows it only after a repeated failure (or on request).

Marks are characters every Chinese font has (√ × ○, from GB2312), not emoji: a machine
without an emoji font shows them too. In a notebook the status is also a coloured label
(:class:`CheckReport`'s HTML), never an error box.
"""
from __future__ import annotations

import html

from ..authoring import Exercise
from .results import CaseResult, ExerciseResult

# status: (mark, word, colour of the notebook's label)
STATUSES = {"passed": ("√", "通过", "#1a7f37"), "failed": ("×", "未通过", "#cf222e"),
            "unanswered": ("○", "还没有作答", "#6e7781")}


def status(result: ExerciseResult) -> str:
    return "passed" if result.passed else "unanswered" if result.unanswered else "failed"


def score_text(points: float, max_points: float) -> str:
    return f"{points:g}/{max_points:g} 分"


def public_case_lines(public: list[CaseResult]) -> list[str]:
    """One line per public case; a failed one also shows what was expected and what came."""
    lines = []
    for case in public:
        verdict = case.verdict
        mark = STATUSES["passed" if verdict.ok else "failed"][0]
        lines.append(f"  {mark} 用例「{case.case}」" + ("" if verdict.ok else f"：{verdict.message}"))
        if not verdict.ok:
            if verdict.expected is not None:
                lines.append(f"      期望：{verdict.expected}")
            if verdict.got is not None:
                lines.append(f"      实际：{verdict.got}")
    return lines


def _parts(result: ExerciseResult, exercise: Exercise, show_hint: bool) -> tuple[str, str, list[str]]:
    """(the exercise and its score, what follows it on the first line, the detail lines)."""
    public = [c for c in result.cases if not c.hidden]
    hidden = [c for c in result.cases if c.hidden]
    head = f"{exercise.id} {exercise.title}（{score_text(result.points, result.max_points)}）"
    if result.passed:
        counts = f"{len(public)} 个公开用例" + (f"、{len(hidden)} 个隐藏用例" if hidden else "")
        return head, f"：{counts}全部通过。", []
    if result.unanswered:
        return head, f"：{result.error}", []
    details = [f"  {result.error}"] if result.error is not None else []
    details += public_case_lines(public)
    if hidden:
        failed = sum(not c.verdict.ok for c in hidden)
        details.append(f"  隐藏用例：{len(hidden) - failed}/{len(hidden)} 通过")
    if exercise.hint and show_hint:
        details.append(f"  提示：{exercise.hint}")
    return head, "", details


class CheckReport:
    """What a check cell shows: plain text (terminals, nbgrader's feedback, reports) and, in
    a notebook, the same words after a coloured status label."""

    def __init__(self, result: ExerciseResult, exercise: Exercise, *, show_hint: bool = True,
                 notes: tuple[str, ...] = ()):
        self.status = status(result)
        self.head, self.tail, details = _parts(result, exercise, show_hint)
        self.details = details + list(notes)

    @property
    def text(self) -> str:
        mark, word, _ = STATUSES[self.status]
        return "\n".join([f"{mark} {word} {self.head}{self.tail}", *self.details])

    def __repr__(self) -> str:
        return self.text

    def _repr_html_(self) -> str:
        _, word, colour = STATUSES[self.status]
        label = (f'<span class="grader-status grader-{self.status}" style="background:{colour};color:#fff;'
                 f'border-radius:3px;padding:0 0.4em;margin-right:0.5em;font-weight:bold">{word}</span>')
        details = html.escape("\n".join(self.details))
        body = f'<pre style="margin:0.3em 0 0 0">{details}</pre>' if self.details else ""
        return f"<div>{label}{html.escape(self.head + self.tail)}{body}</div>"


def format_result(result: ExerciseResult, exercise: Exercise, *, show_hint: bool = True) -> str:
    return CheckReport(result, exercise, show_hint=show_hint).text
