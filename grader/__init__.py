"""Grading for the course: exercise declarations, notebook checks, nbgrader integration.

Notebooks use one function: ``from grader import check``; ``python -m grader`` is the
command line for learners, instructors and CI.
"""
from .check import ExerciseFailed, check

__all__ = ["check", "ExerciseFailed"]
