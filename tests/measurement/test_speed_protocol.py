"""The speed check compares fastest samples: a burst of load on one sample cannot fail it."""
import time

from grader.authoring.timing import measure_ratio


def spin(seconds: float) -> None:
    """Work for ``seconds`` of this thread's CPU time (the clock the checks read)."""
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


class Interrupted:
    """Spins ``seconds`` per call; a few calls also lose 20 ms to 'another process'."""

    def __init__(self, seconds: float, every: int):
        self.seconds, self.every, self.calls = seconds, every, 0

    def __call__(self):
        self.calls += 1
        spin(self.seconds + (0.02 if self.calls % self.every == 0 else 0.0))


def test_bursts_of_load_on_some_samples_do_not_move_the_ratio():
    ratio = measure_ratio(Interrupted(2e-4, every=4), lambda: spin(2e-4), (), repeats=9)
    assert 0.7 < ratio < 1.5
