"""Grading for the course: exercise declarations, notebook checks, nbgrader integration.

Notebooks use one function, ``from grader import check``; ``python -m grader`` is the
command line for learners, instructors and CI. Importing this package loads nothing
else, so the sandbox can import its small untrusted-side modules without the exercise
declarations (which import the reference solutions).
"""


def check(exercise_id: str) -> None:
    """Check the learner's answer to ``exercise_id`` (see :func:`grader.check.check`)."""
    from .check import check as run_check

    run_check(exercise_id, _caller_depth=2)


__all__ = ["check"]
