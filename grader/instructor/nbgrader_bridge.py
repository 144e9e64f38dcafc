"""nbgrader keeps its role (gradebook, feedback, formgrader); the points are the harness's.

:class:`IsolatedGrading` takes the place of nbgrader's ``Execute`` preprocessor during
``nbgrader autograde``: instead of running the submission in a kernel next to the
tests, it writes the isolated harness's verdict into each check cell — a plain output
for a pass, the points as a result for partial credit, an error output for none — and
nbgrader's own ``SaveAutoGrades`` turns that into points. A record saved by ``python -m grader autograde`` is reused only if it
was made from the very bytes now in ``submitted/`` with the course's seed.
"""
from __future__ import annotations

from pathlib import Path

from nbgrader.preprocessors import NbGraderPreprocessor
from nbformat.v4 import new_output
from traitlets import Unicode

from ..grading.feedback import format_result, note, reason
from ..grading.harness import grade_notebook, graded_exercises
from ..grading.notebooks import CHECK_PREFIX, exercise_id, grade_id
from ..grading.records import results_from_records
from ..grading.results import ExerciseResult
from .batch import current_record
from .seed import course_seed


def results_path(course_root: Path, student: str, assignment: str, notebook: str) -> Path:
    return Path(course_root) / "harness" / assignment / student / f"{notebook}.json"


def autograde_preprocessors() -> list:
    """nbgrader 0.9's autograde pipeline with ``Execute`` replaced by :class:`IsolatedGrading`."""
    from nbconvert.preprocessors import ClearMetadataPreprocessor
    from nbgrader.preprocessors import (AssignLatePenalties, CheckCellMetadata, IgnorePattern,
                                        LimitOutput, SaveAutoGrades)

    return [IsolatedGrading, IgnorePattern, ClearMetadataPreprocessor, LimitOutput, SaveAutoGrades,
            AssignLatePenalties, CheckCellMetadata]


def _outputs_for(result: ExerciseResult, text: str) -> list:
    """The check cell's outputs, as nbgrader's ``determine_grade`` reads them: an error
    output scores 0, an ``execute_result`` holding a number scores that number (partial
    credit), anything else full points."""
    if result.passed:
        return [new_output("stream", name="stdout", text=text + "\n")]
    if result.points > 0:
        return [new_output("stream", name="stdout", text=text + "\n"),
                new_output("execute_result", data={"text/plain": f"{result.points:g}"}, execution_count=1)]
    return [new_output("error", ename="ExerciseFailed", evalue=reason(result), traceback=text.splitlines())]


class IsolatedGrading(NbGraderPreprocessor):
    """Fill check cells with the isolated harness's results (see module docstring)."""

    course_root = Unicode("", help="The course directory (holds .grader_seed and harness/).").tag(config=True)

    def preprocess(self, nb, resources):
        info = resources["nbgrader"]
        root = Path(self.course_root)
        seed = course_seed(root)
        submitted = root / "submitted" / info["student"] / info["assignment"] / f"{info['notebook']}.ipynb"
        record = current_record(results_path(root, info["student"], info["assignment"], info["notebook"]),
                                submitted, seed)
        exercises = graded_exercises(nb)
        if record is not None and record["status"] == "graded":
            results, notes = results_from_records(record["exercises"]), record.get("notes", [])
        else:
            submission = grade_notebook(nb, seed=seed, exercises=exercises)
            results, notes = {r.exercise_id: r for r in submission.exercises}, submission.notes
        by_id = {e.id: e for e in exercises}
        first = True
        for cell in nb.cells:
            if cell.cell_type != "code":
                continue
            cell.outputs, cell.execution_count = [], None
            identifier = grade_id(cell)
            if identifier.startswith(CHECK_PREFIX) and exercise_id(identifier) in results:
                result = results[exercise_id(identifier)]
                text = format_result(result, by_id[result.exercise_id])
                if first and notes:
                    text += "\n" + "\n".join(map(note, notes))
                first = False
                cell.outputs = _outputs_for(result, text)
        return nb, resources
