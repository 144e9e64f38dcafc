"""04.lazy_recorder's prompt promises that ``fn`` calls only functional ATen ops: an in-place op
returns the very tensor it was given, and a recorder that knows tensors by identity (as the
prompt's steps suggest) would take two values for one. No case, on any seed, may run one."""
import functools

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from course_models import ch04_models as models
from grader import chapters
from grader.grading.judge import exercise_cases


class _MutatingOps(TorchDispatchMode):
    """The ATen ops that write to one of their arguments."""

    def __init__(self):
        super().__init__()
        self.found: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func._schema.is_mutable:
            self.found.append(str(func))
        return func(*args, **(kwargs or {}))


def _mutating_ops(fn, inputs) -> list[str]:
    with _MutatingOps() as mode:
        fn(*[x.to("meta") for x in inputs])
    return mode.found


def test_the_check_sees_an_in_place_op():
    """A 1-D value times a matrix: matmul's decomposition squeezes its result in place."""
    program = functools.partial(models.run_program, [("reduce", 0, 0), ("matmul", 1)])
    assert _mutating_ops(program, (torch.randn(4, 4), torch.randn(4, 4))) == ["aten.squeeze_.dim"]


@pytest.mark.parametrize("seed", range(20))
def test_recorder_programs_are_functional(seed):
    exercise = chapters.get("04.lazy_recorder")
    for planned in exercise_cases(exercise, include_hidden=True, seed=seed):
        built = planned.case.build()
        assert _mutating_ops(built["fn"], built["inputs"]) == [], planned.case.name
