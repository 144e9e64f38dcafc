"""Learner-facing feedback, in Chinese: the status, which case failed, expected vs got, a hint.

Hidden cases are reported as pass/fail only: their inputs never appear. The hint names
the approach, so self-study shows it only after a repeated failure (or on request).
"""
from __future__ import annotations

from ..authoring import Exercise
from .results import CaseResult, ExerciseResult


def public_case_lines(public: list[CaseResult]) -> list[str]:
    """One line per public case; a failed one also shows what was expected and what came."""
    lines = []
    for case in public:
        verdict = case.verdict
        lines.append(f"  {'✓' if verdict.ok else '✗'} 用例「{case.case}」" + ("" if verdict.ok else f"：{verdict.message}"))
        if not verdict.ok:
            if verdict.expected is not None:
                lines.append(f"      期望：{verdict.expected}")
            if verdict.got is not None:
                lines.append(f"      实际：{verdict.got}")
    return lines


def format_result(result: ExerciseResult, exercise: Exercise, *, show_hint: bool = True) -> str:
    public = [c for c in result.cases if not c.hidden]
    hidden = [c for c in result.cases if c.hidden]
    score = f"（{result.points:g}/{result.max_points:g} 分）"
    if result.passed:
        counts = f"{len(public)} 个公开用例" + (f"、{len(hidden)} 个隐藏用例" if hidden else "")
        return f"✅ {exercise.id} {exercise.title} 通过{score}：{counts}全部通过。"
    if result.unanswered:
        return f"⬜ {exercise.id} {exercise.title} 还没有作答{score}：{result.error}"
    lines = [f"❌ {exercise.id} {exercise.title} 未通过{score}"]
    if result.error is not None:
        lines.append(f"  {result.error}")
    lines += public_case_lines(public)
    if hidden:
        failed = sum(not c.verdict.ok for c in hidden)
        lines.append(f"  隐藏用例：{len(hidden) - failed}/{len(hidden)} 通过")
    if exercise.hint and show_hint:
        lines.append(f"  提示：{exercise.hint}")
    return "\n".join(lines)
