"""Every reference passes its checks; every plausible wrong answer is rejected."""
import pytest

from grader import chapters
from grader.grading.selfstudy import run_in_kernel
from wrong_answers import WRONG_ANSWERS

SEEDS = [0, 1, 2]


@pytest.mark.parametrize("exercise_id", [e.id for e in chapters.every_exercise()])
@pytest.mark.parametrize("seed", SEEDS)
def test_reference_passes_public_and_hidden_cases(exercise_id, seed):
    exercise = chapters.get(exercise_id)
    result = run_in_kernel(exercise, exercise.reference_function, include_hidden=True, seed=seed)
    assert result.passed, result.reason
    assert any(c.hidden for c in result.cases) and any(not c.hidden for c in result.cases)


@pytest.mark.parametrize("exercise_id, wrong", WRONG_ANSWERS, ids=[w.__name__ for _, w in WRONG_ANSWERS])
def test_wrong_answer_is_rejected_by_public_cases(exercise_id, wrong):
    result = run_in_kernel(chapters.get(exercise_id), wrong, include_hidden=False, seed=0)
    assert not result.passed and result.points < result.max_points and result.reason


def test_every_exercise_has_a_wrong_answer_in_the_tests():
    assert {e.id for e in chapters.every_exercise()} == {exercise_id for exercise_id, _ in WRONG_ANSWERS}


def test_stub_that_raises_not_implemented_gets_a_clear_message():
    def stub(gm):
        raise NotImplementedError
    result = run_in_kernel(chapters.get("03.op_census"), stub, include_hidden=False, seed=0)
    assert result.error and "还没有实现" in result.error


def test_exception_in_learner_code_is_reported_per_case():
    def broken(gm):
        return 1 / 0
    result = run_in_kernel(chapters.get("03.remove_dropout"), broken, include_hidden=False, seed=0)
    assert "ZeroDivisionError" in result.reason


def test_wrong_return_type_is_explained():
    result = run_in_kernel(chapters.get("03.remove_dropout"), lambda gm: None, include_hidden=False, seed=0)
    assert "GraphModule" in result.reason and "NoneType" in result.reason


def test_hidden_case_feedback_never_shows_inputs_or_values():
    result = run_in_kernel(chapters.get("03.fusion_groups"), lambda gm: [], include_hidden=True, seed=0)
    hidden = [c for c in result.to_json()["cases"] if c["hidden"]]
    assert hidden and all(set(c) == {"case", "hidden", "passed", "message"} for c in hidden)
