"""Grade one submission with learner code isolated from everything that decides points.

Trusted side (this process): reads the notebook, builds every case, computes the
reference facts, and compares. Untrusted side (:mod:`grader.sandbox`): runs the
submission's code cells and calls its functions on the cases' inputs, in a confined
process that cannot see the solutions or the course's secret seed. Which exercises a
notebook is graded on comes from the declarations, not from the submission's cells, so
deleting or retyping a check cell changes nothing.
"""
from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from pathlib import Path

from .confinement import Limits
from .errors import GraderError
from .exercise import Exercise, Verdict
from .exercises import load as load_exercises
from .isolation import Task, TaskOutcome, run_in_sandbox
from .notebooks import CHECK_PREFIX, exercise_id, grade_id, read_notebook
from .results import CaseResult, ExerciseResult
from .run import exercise_cases, expected_facts, judge, not_implemented

REGISTRY = load_exercises()

SOLUTIONS_DIR = Path(__file__).resolve().parent.parent / "solutions"
CHAPTER_PATTERN = re.compile(r"^(\d\d)_")


@dataclass
class SubmissionResult:
    exercises: list[ExerciseResult]
    notes: list[str] = field(default_factory=list)  # skipped cells, failing cells (Chinese)
    isolation: str = ""

    @property
    def points(self) -> int:
        return sum(r.points for r in self.exercises)

    @property
    def max_points(self) -> int:
        return sum(r.max_points for r in self.exercises)

    def to_json(self) -> dict:
        return {"points": self.points, "max_points": self.max_points,
                "exercises": [r.to_json() for r in self.exercises], "notes": self.notes,
                "isolation": self.isolation}


def graded_exercises(notebook, name: str = "") -> list[Exercise]:
    """Every declared exercise of the chapters this notebook belongs to, in order."""
    chapters = set()
    for cell in notebook.cells:
        identifier = grade_id(cell)
        if identifier.startswith(("answer-", "check-")):
            chapters.add(REGISTRY.get(exercise_id(identifier)).chapter)
    if (match := CHAPTER_PATTERN.match(Path(name).name)) is not None and REGISTRY.chapter(match.group(1)):
        chapters.add(match.group(1))
    exercises = [e for e in REGISTRY.exercises.values() if e.chapter in chapters]
    if not exercises:
        raise GraderError("the notebook has no graded cells (no cell with nbgrader grade_id 'check-…')")
    return exercises


def learner_cells(notebook) -> list[tuple[int, str]]:
    """Code cells to run in the sandbox: everything but the check cells."""
    return [(index, cell.source) for index, cell in enumerate(notebook.cells)
            if cell.cell_type == "code" and not grade_id(cell).startswith(CHECK_PREFIX)]


def _verdict_from(exercise: Exercise, outcome: TaskOutcome, built: dict, expected) -> tuple[Verdict, str | None]:
    """(verdict, exercise-level error) for one case's sandbox outcome."""
    if outcome.failure is not None:
        return Verdict(False, outcome.failure), None
    payload = outcome.payload
    error = payload.get("error")
    if error == "not_implemented":
        return Verdict(False, "还没有实现"), not_implemented(exercise)
    if error == "missing":
        return Verdict(False, "函数不存在"), f"没有找到函数 {exercise.function}：答案单元格没有定义它，或者运行出错。"
    if error is not None:
        return Verdict(False, f"你的函数抛出了异常 {payload.get('detail', error)}"), None
    try:
        verdict = judge(exercise, expected, payload["artifact"], built)
    except Exception as failure:  # malformed artifact: never let it crash the batch
        verdict = Verdict(False, f"返回值无法评分（{type(failure).__name__}: {failure}）。")
    return verdict, None


def grade_notebook(notebook, *, seed: int, name: str = "", limits: Limits | None = None,
                   exercises: list[Exercise] | None = None) -> SubmissionResult:
    """Grade a parsed notebook: sandbox for learner code, trusted comparisons here.

    ``exercises`` defaults to those of the notebook's chapters; batch grading passes the
    assignment's own list, so nothing a submission does to its cells can change it.
    """
    exercises = exercises or graded_exercises(notebook, name)
    limits = limits or Limits(protected_paths=(str(SOLUTIONS_DIR),))
    plan, tasks = [], []
    for exercise in exercises:
        for case, hidden in exercise_cases(exercise, include_hidden=True, seed=seed):
            task_id = len(tasks)
            tasks.append(Task(task_id, exercise.function, exercise.produce_name, case.build()))
            plan.append((exercise, case, hidden, task_id))
    report = run_in_sandbox(learner_cells(notebook), tasks, limits)
    results = {e.id: ExerciseResult(e.id, e.title, e.points) for e in exercises}
    for exercise, case, hidden, task_id in plan:
        result = results[exercise.id]
        if result.error is not None:
            continue
        verdict, error = _verdict_from(exercise, report.outcomes[task_id], case.build(),
                                       expected_facts(exercise, case))
        if error is not None:
            result.error, result.cases = error, []
            continue
        result.cases.append(CaseResult(case.name, hidden, verdict))
    notes = [f"第 {i + 1} 个单元格{how}，评分时跳过了它。" for i, how in sorted(report.skipped_cells.items())]
    notes += [f"第 {i + 1} 个单元格出错：{error}" for i, error in sorted(report.cell_errors.items())]
    return SubmissionResult(list(results.values()), notes, report.isolation)


def grade_file(path, *, seed: int | None = None, limits: Limits | None = None,
               exercises: list[Exercise] | None = None) -> SubmissionResult:
    notebook = read_notebook(path)
    return grade_notebook(notebook, seed=random.randrange(2**31) if seed is None else seed,
                          name=Path(path).name, limits=limits, exercises=exercises)
