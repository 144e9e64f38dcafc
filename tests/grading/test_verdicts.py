"""Every verdict right: each exercise rejects the mistakes learners make, on every seed,
and accepts every correct answer, however it is written.

The catalogue (``tests/helpers/answers_chNN.py``) holds, per exercise, at least three
plausible wrong answers, each labelled with the misconception it embodies, and correct
answers written differently from the reference. For each of ``SEEDS``:

- a wrong answer scores less than full marks on the public and hidden cases together;
  the public cases alone reject it (so a pass in the notebook means the grade) unless the
  catalogue says why only a hidden case can, and the designed hidden cases alone reject
  it too (they are the same on every seed, so no unlucky draw lets it through);
- the reference and every catalogued correct answer pass every case.

Everything is judged in this process through the grader's own call and judge
(``test_equal_verdicts.py`` runs a sample through the sandbox), with one torch thread (the
machine's cores are shared by the test workers). A case that does not depend on the seed
is called and judged once, and its verdict counts for every seed.
"""
import pytest
import torch

from answers import RIGHT_ANSWERS, WRONG_ANSWERS
from grader import chapters
from grader.grading.judge import PlannedCase, exercise_cases, judge_exercise
from grader.grading.results import ExerciseResult
from grader.sandbox.calls import call_learner, read_outcome

SEEDS = range(20)
MIN_MISCONCEPTIONS = 3

_judged: dict[tuple, ExerciseResult] = {}


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def judged_case(exercise, function, planned: PlannedCase) -> ExerciseResult:
    """``function`` called on one case and judged (memoised: the same case, the same verdict)."""
    key = (exercise.id, function.__module__, function.__qualname__, planned.case.name, planned.hidden, planned.seed)
    if key not in _judged:
        outcome = read_outcome(call_learner(function, exercise.produce, planned.case.build()))
        _judged[key] = judge_exercise(exercise, [planned], [outcome])
    return _judged[key]


def judged(exercise, function, cases: list[PlannedCase]) -> ExerciseResult:
    """The exercise's result on ``cases``: its one-case results joined, as the judge would."""
    result = ExerciseResult(exercise.id, exercise.title, exercise.points, partial_credit=exercise.partial_credit)
    for planned in cases:
        one = judged_case(exercise, function, planned)
        if one.error is not None:
            return one
        result.cases += one.cases
    return result


def describe(result: ExerciseResult) -> str:
    return f"{result.points}/{result.max_points}: " + "; ".join(
        f"{c.case} {'ok' if c.verdict.ok else c.verdict.message}" for c in result.cases)


def answer_id(answer) -> str:
    return f"{answer.exercise_id}-{answer.function.__name__}"


EXERCISES = chapters.every_exercise()
REFERENCES = [(e.id, e.reference_function) for e in EXERCISES]


@pytest.mark.parametrize("exercise", EXERCISES, ids=lambda e: e.id)
def test_catalogue_has_misconceptions_and_a_right_answer_for_every_exercise(exercise):
    wrong = [a for a in WRONG_ANSWERS if a.exercise_id == exercise.id]
    right = [a for a in RIGHT_ANSWERS if a.exercise_id == exercise.id]
    assert len(wrong) >= MIN_MISCONCEPTIONS, \
        f"{exercise.id}: {len(wrong)} catalogued wrong answers, need {MIN_MISCONCEPTIONS}"
    assert len({a.misconception for a in wrong}) == len(wrong) and all(a.misconception.strip() for a in wrong)
    assert right, f"{exercise.id}: no correct answer written differently"


def test_catalogue_names_only_declared_exercises():
    declared = {e.id for e in EXERCISES}
    assert {a.exercise_id for a in WRONG_ANSWERS + RIGHT_ANSWERS} <= declared


@pytest.mark.parametrize("exercise", EXERCISES, ids=lambda e: e.id)
def test_case_names_are_unique_on_every_seed(exercise):
    for seed in SEEDS:
        names = [planned.case.name for planned in exercise_cases(exercise, include_hidden=True, seed=seed)]
        assert len(names) == len(set(names)), (seed, names)
        assert any(not p.hidden for p in exercise_cases(exercise, include_hidden=True, seed=seed))


@pytest.mark.parametrize("answer", WRONG_ANSWERS, ids=answer_id)
def test_wrong_answer_is_rejected_on_every_seed(answer):
    exercise = chapters.get(answer.exercise_id)
    public = judged(exercise, answer.function, exercise_cases(exercise, include_hidden=False, seed=0))
    if answer.hidden_only:
        assert public.passed, f"catalogued as hidden-only, but the public cases reject it: {describe(public)}"
    else:
        assert not public.passed, f"the public cases accept it ({answer.misconception})"
    designed = [PlannedCase(case, True) for case in exercise.designed_cases()]
    assert designed and not judged(exercise, answer.function, designed).passed, \
        f"no designed hidden case rejects it ({answer.misconception})"
    for seed in SEEDS:
        result = judged(exercise, answer.function, exercise_cases(exercise, include_hidden=True, seed=seed))
        assert result.points < result.max_points, f"seed {seed}: full marks ({answer.misconception})"


@pytest.mark.parametrize("exercise_id, function", REFERENCES + [(a.exercise_id, a.function) for a in RIGHT_ANSWERS],
                         ids=[f"{i}-reference" for i, _ in REFERENCES] + [answer_id(a) for a in RIGHT_ANSWERS])
def test_right_answer_passes_every_case_on_every_seed(exercise_id, function):
    exercise = chapters.get(exercise_id)
    for seed in SEEDS:
        result = judged(exercise, function, exercise_cases(exercise, include_hidden=True, seed=seed))
        assert result.passed, f"seed {seed}: {describe(result)}"
    assert any(planned.hidden for planned in exercise_cases(exercise, include_hidden=True, seed=0)), "no hidden case"
