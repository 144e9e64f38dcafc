"""Every chapter round-trips through grading: the instructor's source (references injected
into the whole notebook, demonstrations and all) scores full marks, the blank notebook
learners receive scores 0 with every exercise reported as not answered yet."""
import pytest

from grader.grading.feedback import reason
from grader.grading.harness import SOLUTIONS_DIR, grade_notebook
from grader.grading.notebooks import read_notebook
from grader.instructor.release import inject_solutions
from grader.sandbox.confinement import Limits
from notebook_builders import NOTEBOOKS

LIMITS = Limits(cell_timeout_s=120, task_timeout_s=60, protected_paths=(str(SOLUTIONS_DIR),))


@pytest.mark.parametrize("path", sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb")), ids=lambda p: p.name)
def test_instructor_source_scores_full_marks_and_the_blank_notebook_zero(path):
    source = grade_notebook(inject_solutions(read_notebook(path)), seed=5, name=path.name, limits=LIMITS)
    assert source.points == source.max_points, [reason(r) for r in source.exercises if not r.passed]
    blank = grade_notebook(read_notebook(path), seed=5, name=path.name, limits=LIMITS)
    assert blank.points == 0 and all(r.unanswered for r in blank.exercises), [reason(r) for r in blank.exercises]
