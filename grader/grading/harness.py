"""Grade one submission with learner code isolated from everything that decides points.

Trusted side (this process): reads the notebook, builds every case, computes the
reference facts, and compares. Untrusted side (:mod:`grader.sandbox`): runs the
submission's code cells that the graded functions need (:mod:`.cell_slice`) and calls
those functions on the cases' inputs, in a confined process that cannot see the
solutions or the course's secret seed. Which exercises a
notebook is graded on comes from the declarations, not from the submission's cells, so
deleting or retyping a check cell changes nothing.
"""
from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from pathlib import Path

import cxx_toolchain

from .. import chapters
from ..authoring import Exercise
from ..errors import GraderError
from ..sandbox.confinement import Limits
from ..sandbox.driver import SandboxReport, Task, run_in_sandbox
from ..sandbox.outcome import Artifact, Facts, Failure, FailureKind, Outcome
from .cell_slice import needed_cells, statically_bound
from .feedback import cell_notes
from .judge import exercise_cases, judge_exercise
from .notebooks import CHECK_PREFIX, grade_id, named_exercises, read_notebook
from .records import exercise_record
from .results import ExerciseResult

SOLUTIONS_DIR = Path(__file__).resolve().parents[2] / "solutions"
CHAPTER_PATTERN = re.compile(r"^(\d\d)_")

@dataclass
class SubmissionResult:
    exercises: list[ExerciseResult]
    notes: list[str] = field(default_factory=list)  # skipped cells, failing cells (Chinese)
    isolation: str = ""

    @property
    def points(self) -> float:
        return sum(r.points for r in self.exercises)

    @property
    def max_points(self) -> int:
        return sum(r.max_points for r in self.exercises)

    def to_json(self) -> dict:
        return {"points": self.points, "max_points": self.max_points,
                "exercises": [exercise_record(r) for r in self.exercises], "notes": self.notes,
                "isolation": self.isolation}


def graded_exercises(notebook, name: str = "") -> list[Exercise]:
    """Every declared exercise of the chapters this notebook belongs to, in order."""
    numbers = {chapters.get(identifier).chapter for identifier in named_exercises(notebook)}
    if (match := CHAPTER_PATTERN.match(Path(name).name)) is not None:
        numbers.add(match.group(1))
    exercises = [e for number in sorted(numbers) for e in chapters.chapter(number)]
    if not exercises:
        raise GraderError("the notebook has no graded cells (no cell with nbgrader grade_id 'check-…')")
    return exercises


def learner_cells(notebook) -> list[tuple[int, str]]:
    """Code cells of the submission: everything but the check cells."""
    return [(index, cell.source) for index, cell in enumerate(notebook.cells)
            if cell.cell_type == "code" and not grade_id(cell).startswith(CHECK_PREFIX)]


def _missed_a_name(report: SandboxReport, tasks: list[Task], sliced: list[tuple[int, str]]) -> bool:
    """Did the sliced run lack something its text did not show (a NameError, a function
    that no kept cell binds)?"""
    bound = statically_bound(sliced)
    for task in tasks:
        outcome = report.outcomes[task.id]
        if not isinstance(outcome, Failure):
            continue
        if outcome.kind is FailureKind.MISSING and task.function not in bound:
            return True
        if outcome.kind is FailureKind.RAISED and outcome.detail.startswith("NameError"):
            return True
    return any(error.startswith("NameError") for error in report.cell_errors.values())


def run_submission(cells: list[tuple[int, str]], tasks: list[Task], limits: Limits) -> SandboxReport:
    """Run the cells the tasks need; if that missed a name, run every cell instead."""
    sliced = needed_cells(cells, {task.function for task in tasks})
    report = run_in_sandbox(sliced, tasks, limits)
    if len(sliced) < len(cells) and _missed_a_name(report, tasks, sliced):
        report = run_in_sandbox(cells, tasks, limits)
    return report


def analyze_in_sandbox(plan, outcomes: dict[int, Outcome], limits: Limits) -> dict[int, Outcome]:
    """Turn the artifacts of exercises whose analysis is confined (:attr:`Exercise.analysis_confined`)
    into facts in a confined process of its own, under the learner's limits: analysing runs
    learner-derived programs (rebuilt graphs, TorchScript, exported programs), which may loop
    or allocate without bound. (No lower memory cap: the limit is on address space, and a
    CUDA build of torch alone maps about 3.4 GiB when imported.) Returns the outcomes with
    :class:`Facts`, or an ``ANALYSIS`` failure, in place of those artifacts."""
    tasks, values = [], {}
    task_id = 0
    for exercise, cases in plan:
        for planned in cases:
            outcome = outcomes[task_id]
            if isinstance(outcome, Artifact) and exercise.analysis_confined:
                values[f"artifact_{task_id}"] = outcome.value
                tasks.append(Task(task_id, exercise.function, exercise.analyze_name, planned.case.build(),
                                  value=f"artifact_{task_id}"))
            task_id += 1
    if not tasks:
        return outcomes
    analysed = run_in_sandbox([], tasks, limits, values=values, preforked=True).outcomes
    merged = dict(outcomes)
    for task_id, analysis in analysed.items():
        merged[task_id] = (Facts(analysis.value) if isinstance(analysis, Artifact)
                           else Failure(FailureKind.ANALYSIS, cause=analysis))
    return merged


def grade_notebook(notebook, *, seed: int, name: str = "", limits: Limits | None = None,
                   exercises: list[Exercise] | None = None, include_hidden: bool = True) -> SubmissionResult:
    """Grade a parsed notebook: sandbox for learner code, trusted comparisons here.

    ``exercises`` defaults to those of the notebook's chapters; batch grading passes the
    assignment's own list, so nothing a submission does to its cells can change it.
    """
    toolchain = cxx_toolchain.current()
    if toolchain.kind == "missing":  # compile exercises would fail for a reason not the learner's
        raise GraderError(f"environment problem, nothing graded: {toolchain.description}; Inductor's "
                          f"CPU kernels need it. {toolchain.remedy}")
    exercises = exercises or graded_exercises(notebook, name)
    limits = limits or Limits(protected_paths=(str(SOLUTIONS_DIR),))
    plan = [(exercise, exercise_cases(exercise, include_hidden=include_hidden, seed=seed)) for exercise in exercises]
    tasks = []
    for exercise, cases in plan:
        for planned in cases:
            tasks.append(Task(len(tasks), exercise.function, exercise.produce_name, planned.case.build()))
    report = run_submission(learner_cells(notebook), tasks, limits)
    outcomes_by_task = analyze_in_sandbox(plan, report.outcomes, limits)
    results, next_task = [], 0
    for exercise, cases in plan:
        outcomes = [outcomes_by_task[next_task + index] for index in range(len(cases))]
        next_task += len(cases)
        results.append(judge_exercise(exercise, cases, outcomes))
    return SubmissionResult(results, cell_notes(report.skipped_cells, report.cell_errors), report.isolation)


def grade_file(path, *, seed: int | None = None, limits: Limits | None = None,
               exercises: list[Exercise] | None = None) -> SubmissionResult:
    notebook = read_notebook(path)
    return grade_notebook(notebook, seed=random.randrange(2**31) if seed is None else seed,
                          name=Path(path).name, limits=limits, exercises=exercises)
