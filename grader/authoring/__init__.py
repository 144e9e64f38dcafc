"""What a chapter's exercise declarations are written with (``grader/chapters/chNN_*.py``).

An exercise names a learner function, builds cases, turns the function's result into a
plain-data *artifact* (``produce``, run next to learner code), optionally analyses it on
the trusted side (``analyze``) and compares it with the reference's (``compare``).

Imports only :mod:`grader.sandbox` (the plain-data boundary and the graph codec) and the
course's ``lib/`` packages; never the chapters, grading or the instructor's tools.
"""
from .artifacts import (artifact_error, compare_equal, compare_outputs, graph_facts, graph_pass_artifact,
                        node_label, seeded_build, short)
from .exercise import PASS, Case, Exercise, PerformanceGoal, Verdict, keep_artifact, no_cases
from .timing import SpeedGoal, measure_ratio

__all__ = [
    "Case", "Exercise", "Verdict", "PASS", "PerformanceGoal", "SpeedGoal", "keep_artifact", "no_cases", "measure_ratio",
    "artifact_error", "compare_equal", "compare_outputs", "graph_facts", "graph_pass_artifact", "node_label",
    "seeded_build", "short",
]
