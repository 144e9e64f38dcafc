"""Analysing a learner's artifact runs a learner-derived program (here a TorchScript module)
in a confined process of its own: one that never ends or asks for 20 GB fails its own
exercise with a reason, and every other exercise is graded normally."""
import textwrap

import pytest

from grader.grading.feedback import reason
from grader.grading.records import exercise_record
from grader import chapters
from grader.grading.harness import grade_file
from grader.sandbox.confinement import Limits
from notebook_builders import NOTEBOOKS, write_answers_only

LIMITS = Limits(cell_timeout_s=60, task_timeout_s=30, memory_bytes=4 * 2**30)

SCRIPTED = textwrap.dedent("""
    import torch
    from typing import Optional

    class Gate(torch.nn.Module):
        def forward(self, x, temperature: Optional[float] = None):
            {body}
            return x

    def make_scriptable(model):
        return torch.jit.script(Gate())
""")

PROGRAMS = {
    "endless_loop": ("i = 0\n        while i >= 0:\n            i += 1", "超时"),
    "twenty_gigabytes": ("x = x + torch.zeros(5368709120)", "运行失败"),
}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_a_program_that_stalls_its_analysis_fails_only_its_exercise(name, tmp_path):
    body, words = PROGRAMS[name]
    path = write_answers_only(tmp_path / f"{name}.ipynb", {"02.make_scriptable": SCRIPTED.format(body=body)},
                              notebook_path=NOTEBOOKS / "02_torchscript.ipynb")
    submission = grade_file(path, seed=3, limits=LIMITS)
    by_id = {r.exercise_id: r for r in submission.exercises}
    assert set(by_id) == {e.id for e in chapters.chapter("02")}
    attacked = by_id.pop("02.make_scriptable")
    assert attacked.points == 0 and any(words in c.verdict.message for c in attacked.cases), exercise_record(attacked)
    for result in by_id.values():
        assert result.passed, (result.exercise_id, reason(result))
