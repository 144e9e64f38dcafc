"""Learner-facing feedback, in Chinese: the status, which case failed, expected vs got, a hint,
and the words for every failure an outcome can come to. All of it is here: the notebook,
the command line, nbgrader's feedback and the JSON reports say the same.

Hidden cases are reported as pass/fail only: their inputs never appear. The hint names
the approach, so self-study shows it only after a repeated failure (or on request).

Marks are characters every Chinese font has (√ × ○, from GB2312), not emoji: a machine
without an emoji font shows them too. In a notebook the status is also a coloured label
(:class:`CheckReport`'s HTML), never an error box.
"""
from __future__ import annotations

import html

from ..authoring import Exercise
from ..sandbox.outcome import Failure, FailureKind, ProcessEnd
from .results import CaseResult, ExerciseResult

ALLOWED_DATA = ("None、bool、int、float、str、bytes、list、tuple、键为 str 的 dict、CPU 上的普通 torch.Tensor"
                "（NumPy 的数请先用 int(x)、float(x) 转换，Counter 等 dict 的子类请用 dict(...) 转换）")

# status: (mark, word, colour of the notebook's label)
STATUSES = {"passed": ("√", "通过", "#1a7f37"), "failed": ("×", "未通过", "#cf222e"),
            "unanswered": ("○", "还没有作答", "#6e7781")}
HIDDEN_CASES_LATER = "（隐藏用例只在评分时运行。）"
NO_RESULT_RECORDED = "没有结果。"


def hint_later(exercise_id: str) -> str:
    return f'  （再检查一次仍未通过时会显示提示；也可以运行 check("{exercise_id}", hint=True) 立即查看。）'


def note(text: str) -> str:
    """A note about the submission as a whole (a skipped or failing cell)."""
    return f"注：{text}"


def checking(count: int) -> str:
    return f"正在沙箱里运行 {count} 个练习的公开用例…"


def cannot_check(error) -> str:
    return f"错误：无法检查这本笔记本（{error}）。"


def public_total(points: float, max_points: float) -> str:
    return f"合计：{score_text(points, max_points)}（公开用例；隐藏用例只在评分时运行）"


def unanswered_message(exercise: Exercise, failure: Failure) -> str:
    """Why a whole exercise could not be checked (no function, or still the stub)."""
    if failure.kind is FailureKind.NOT_IMPLEMENTED:
        return f"函数 {exercise.function} 还没有实现（抛出了 NotImplementedError）。"
    return f"没有找到函数 {exercise.function}：答案单元格还没有运行，或者运行时出错、没有定义它。"


def ended(end: ProcessEnd) -> str:
    """How a sandbox process stopped, to follow "你的函数在这个用例上" and the like."""
    if end.timed_out:
        return "超时"
    if end.signal:
        return f"导致沙箱进程被信号 {end.signal} 终止"
    return "导致沙箱进程仍在运行" if end.exit_code is None else f"导致沙箱进程以退出码 {end.exit_code} 结束"


# A case's failure in the learner's words (ANALYSIS: analysis_message). MISSING and NOT_IMPLEMENTED
# in a case make the whole exercise unanswered (unanswered_message); these words are for an analysis
# that came to them (an op of the returned program that raises NotImplementedError).
CASE_FAILURES = {
    FailureKind.MISSING: "找不到要调用的函数。",
    FailureKind.NOT_IMPLEMENTED: "抛出了 NotImplementedError。",
    FailureKind.RAISED: "你的函数抛出了异常 {detail}",
    FailureKind.NOT_PLAIN: "你的函数返回了评分无法接受的值：{detail}。只接受普通数据：" + ALLOWED_DATA + "。",
    FailureKind.TIMEOUT: "你的函数在这个用例上超时（时限 {seconds:g} 秒）。",
    FailureKind.CRASHED: "你的函数在这个用例上{ended}。",
    FailureKind.CRASHED_BEFORE: "沙箱进程在运行你的代码时{ended}。",
    FailureKind.SKIPPED: "同一练习的前一个用例{ended}，其余用例没有再运行。",
    FailureKind.NO_RESULT: "沙箱没有写出这个用例的结果。",
    FailureKind.MALFORMED: "沙箱写出的结果格式不对。",
    FailureKind.ENVIRONMENT: "{detail}",   # what this machine lacks, said by cxx_toolchain
}


def failure_message(failure: Failure) -> str:
    """A case's failure, in the learner's words."""
    if failure.kind is FailureKind.ANALYSIS:
        return analysis_message(failure.cause)
    return CASE_FAILURES[failure.kind].format(detail=failure.detail, seconds=failure.seconds,
                                              ended=ended(failure.end) if failure.end else "")


def analysis_message(cause: Failure) -> str:
    """Why the learner's return value could not be analysed (in the grader's confined process)."""
    if cause.kind is FailureKind.RAISED:
        return unjudgeable(cause.detail)
    if cause.kind is FailureKind.TIMEOUT:
        return f"分析你的返回值时超时（时限 {cause.seconds:g} 秒）：它运行的程序可能不会结束。"
    return f"分析你的返回值时失败：{failure_message(cause)}"


def unjudgeable(detail: str) -> str:
    """A return value whose analysis or comparison raised ``detail``."""
    return f"返回值无法评分（{detail}）。"


def cell_notes(skipped_cells: dict[int, ProcessEnd], cell_errors: dict[int, str]) -> list[str]:
    """What grading says about the submission's cells: skipped ones, and ones that raised."""
    notes = [f"第 {i + 1} 个单元格{ended(end)}，评分时跳过了它。" for i, end in sorted(skipped_cells.items())]
    return notes + [f"第 {i + 1} 个单元格出错：{error}" for i, error in sorted(cell_errors.items())]


def reason(result: ExerciseResult) -> str:
    """One line: why it failed (hidden cases without their inputs), or "" if passed."""
    if result.error is not None:
        return result.error
    for case in result.cases:
        if not case.verdict.ok:
            where = "隐藏用例" if case.hidden else f"用例「{case.case}」"
            return f"{where}：{case.verdict.message}"
    return ""


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
