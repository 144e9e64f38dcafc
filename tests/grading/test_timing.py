"""Trusted-side speed checks: a clearly faster candidate passes, a slower one fails."""
import time

from grader.authoring.timing import SpeedGoal, measure_ratio


def spin(seconds: float) -> None:
    """Work for ``seconds`` of this thread's CPU time (the clock the checks read)."""
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def test_ratio_of_a_candidate_twice_as_slow_is_about_two():
    ratio = measure_ratio(lambda: spin(2e-4), lambda: spin(1e-4), (), repeats=9)
    assert 1.5 < ratio < 2.8


def test_goal_rejects_the_slow_variant_and_accepts_the_fast_one():
    goal = SpeedGoal(max_ratio=0.7, repeats=9)
    assert goal.judge(lambda: spin(1e-4), lambda: spin(4e-4), ()).ok
    verdict = goal.judge(lambda: spin(4e-4), lambda: spin(4e-4), ())
    assert not verdict.ok and "倍" in verdict.message
