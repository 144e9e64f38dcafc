"""Self-study and grading decide alike: what ``check()`` says in the notebook is what the
isolated harness scores.

Each chapter is graded as three short submissions: one with every reference answer, one
with each exercise's first catalogued wrong answer (public cases, as ``check()`` runs
them), and one with each exercise's second wrong answer on the public and hidden cases of
one seed. The same answer-cell sources are executed in this process for the self-study
path, so both paths call functions defined from identical cells. Every catalogued answer
is judged in-process by ``test_verdicts.py``; this is the sample through the sandbox.
"""
import linecache
import re
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
import torch

from grader.grading.feedback import reason
from grader import chapters
from grader.grading.harness import SOLUTIONS_DIR, grade_notebook
from grader.grading.notebooks import CHECK_PREFIX, grade_id
from grader.grading.selfstudy import run_in_kernel
from grader.sandbox.calls import call_learner, read_outcome
from grader.sandbox.outcome import Failure, FailureKind
from grader.sandbox.confinement import Limits
from answers import WRONG_ANSWERS
from notebook_builders import NOTEBOOKS, answers_only, wrong_answer_source

LIMITS = Limits(cell_timeout_s=120, task_timeout_s=60, protected_paths=(str(SOLUTIONS_DIR),))
HIDDEN_SEED = 7


def chapter_rounds(number: str) -> list[tuple[dict, bool]]:
    """({exercise id: catalogued wrong answer}, with hidden cases) per submission: all
    references, then each exercise's first wrong answer, then its second with the hidden cases."""
    wrong = defaultdict(list)
    for answer in WRONG_ANSWERS:
        if answer.exercise_id.startswith(number + "."):
            wrong[answer.exercise_id].append(answer)
    rounds = [({}, False)]
    for index, hidden in ((0, False), (1, True)):
        answers = {i: listed[index] for i, listed in wrong.items() if index < len(listed)}
        if answers:
            rounds.append((answers, hidden))
    return rounds


def chapter_notebook(number: str) -> Path:
    return next(NOTEBOOKS.glob(f"{number}_*.ipynb"))


def run_cell(source: str, filename: str, namespace: dict) -> None:
    """Execute a cell as a kernel does: its source stays readable to inspect and tracebacks."""
    linecache.cache[filename] = (len(source), None, source.splitlines(keepends=True), filename)
    exec(compile(source, filename, "exec"), namespace)


def self_study_results(notebook, number: str, include_hidden: bool, seed: int) -> dict:
    """Run the submission's cells in this process (as a kernel would) and check each exercise."""
    namespace: dict = {"__name__": "__main__"}
    for index, cell in enumerate(notebook.cells):
        if cell.cell_type == "code" and not grade_id(cell).startswith(CHECK_PREFIX):
            run_cell(cell.source, f"<cell-{number}-{index}>", namespace)
    return {exercise.id: run_in_kernel(exercise, namespace.get(exercise.function), include_hidden=include_hidden,
                                       seed=seed)
            for exercise in chapters.chapter(number)}


def summary(result) -> tuple:
    """Points, exercise-level error and each case's verdict; measured numbers in a message
    (a speed ratio) are masked, since two runs never time alike."""
    return (result.points, result.error,
            [(c.case, c.verdict.ok, re.sub(r"\d+(\.\d+)?", "#", c.verdict.message)) for c in result.cases])


@pytest.mark.parametrize("number", list(chapters.chapter_modules()))
def test_check_and_grading_give_the_same_verdicts(number):
    for answers, include_hidden in chapter_rounds(number):
        seed = HIDDEN_SEED if include_hidden else 0
        sources = {i: wrong_answer_source(a.function, chapters.get(i).function) for i, a in answers.items()}
        notebook = answers_only(chapter_notebook(number), sources)
        graded = grade_notebook(notebook, seed=seed, limits=LIMITS, include_hidden=include_hidden,
                                exercises=list(chapters.chapter(number)))
        in_kernel = self_study_results(notebook, number, include_hidden, seed)
        for result in graded.exercises:
            assert summary(result) == summary(in_kernel[result.exercise_id]), (result.exercise_id, graded.notes)
        for identifier, answer in answers.items():
            assert not in_kernel[identifier].passed or (answer.hidden_only and not include_hidden), identifier
        if not answers:
            assert all(r.passed for r in graded.exercises), [reason(r) for r in graded.exercises]


NUMPY_COUNTS = "import numpy as np\ndef count_ops(gm):\n    return {'Linear': np.int64(2), 'relu': np.int64(1)}\n"


def test_numpy_scalar_return_is_named_in_check_and_in_grading():
    exercise = chapters.get("03.op_census")
    namespace: dict = {"__name__": "__main__"}
    run_cell(NUMPY_COUNTS, "<numpy-counts>", namespace)
    in_kernel = run_in_kernel(exercise, namespace["count_ops"], include_hidden=False, seed=0)
    notebook = answers_only(chapter_notebook("03"), {"03.op_census": NUMPY_COUNTS})
    graded = grade_notebook(notebook, seed=0, limits=LIMITS, include_hidden=False, exercises=[exercise])
    for result in (in_kernel, graded.exercises[0]):
        assert "numpy.int64" in reason(result) and "只接受普通数据" in reason(result) and "int(x)" in reason(result)
        assert "抛出了异常" not in reason(result)
    assert summary(in_kernel) == summary(graded.exercises[0])


def test_a_counter_of_tensors_is_refused_with_its_type():
    outcome = read_outcome(call_learner(lambda: __import__("collections").Counter(a=torch.ones(1)),
                                        lambda function, built: function(), {}))
    assert outcome.kind is FailureKind.NOT_PLAIN and "collections.Counter" in outcome.detail


def test_numpy_array_is_refused_with_its_type():
    outcome = read_outcome(call_learner(lambda: [np.zeros(2)], lambda function, built: function(), {}))
    assert outcome == Failure(FailureKind.NOT_PLAIN, "返回值[0] 的类型是 numpy.ndarray")


def test_self_study_call_that_overruns_its_deadline_times_out():
    def endless(function, built):
        while True:
            pass
    outcome = read_outcome(call_learner(lambda: None, endless, {}, timeout_s=0.2))
    assert outcome == Failure(FailureKind.TIMEOUT, seconds=0.2)


def test_missing_function_is_an_outcome_not_an_exception():
    assert read_outcome(call_learner(None, lambda function, built: function(), {})) == Failure(FailureKind.MISSING)

