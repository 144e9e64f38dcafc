"""Grading for the course: exercise declarations, notebook checks, nbgrader integration.

Notebooks use ``from grader import check`` (and chapter 08 ``my_pieces``); ``python -m grader`` is the
command line for learners, instructors and CI. The packages are layered by role; each
imports only those above it in this list::

    errors       GraderError: bad input (file, notebook, exercise id), reported in one line
    sandbox      learner code: the one call, the plain-data boundary, the confined process
    authoring    what exercises are declared with (Exercise, Case, artifact helpers)
    chapters     the declarations, one module per chapter, loaded lazily
    grading      judging: self-study check(), the isolated harness, results, feedback
    instructor   release, batch autograde, the nbgrader bridge, reports, lint of the notebooks
    cli          ``python -m grader``

Importing this package loads nothing else, so the sandbox imports only its own modules.
"""


def check(exercise_id: str, hint: bool = False) -> None:
    """Check the learner's answer to ``exercise_id`` (see :func:`grader.grading.selfstudy.check`)."""
    from .grading.selfstudy import check as run_check

    run_check(exercise_id, hint, _caller_depth=2)


def my_pieces():
    """Chapter 08's stack pieces from the learner's earlier answers (see
    :func:`grader.grading.stack_pieces.my_pieces`)."""
    from .grading.stack_pieces import my_pieces as load

    return load()


__all__ = ["check", "my_pieces"]
