"""Dynamo never traces the chip's own Python: every code object of its modules is marked skip."""
import inspect
import os
import sys

import torch
from torch._C._dynamo import eval_frame
from torch._dynamo.testing import CompileCounterWithBackend

import toychip
from toychip import untraced

PACKAGE_DIR = os.path.dirname(toychip.__file__)


def marked_code_objects(monkeypatch) -> tuple[int, set]:
    """skip_package's count, and the code objects it marks (recorded as it marks them)."""
    marked = set()
    monkeypatch.setattr(eval_frame, "set_code_exec_strategy", lambda code, strategy: marked.add(code))
    return untraced.skip_package("toychip"), marked


def defined_functions(module):
    """An independent walk: what ``inspect`` lists in the module and its classes, written in its file."""
    for _, value in inspect.getmembers(module):
        members = [m for _, m in inspect.getmembers(value)] if inspect.isclass(value) else [value]
        for member in members:
            if isinstance(member, property):
                member = member.fget
            member = inspect.unwrap(getattr(member, "__func__", member))
            if inspect.isfunction(member) and member.__code__.co_filename == module.__file__:
                yield member


def nested(code):
    yield code
    for const in code.co_consts:
        if inspect.iscode(const):
            yield from nested(const)


def test_every_function_of_the_chip_is_marked_and_nothing_else(monkeypatch):
    count, marked = marked_code_objects(monkeypatch)
    assert count == len(marked)
    modules = [m for name, m in sys.modules.items() if name == "toychip" or name.startswith("toychip.")]
    walked = {code for module in modules for f in defined_functions(module) for code in nested(f.__code__)}
    assert walked - marked == set()
    assert all(code.co_filename.startswith(PACKAGE_DIR) or code.co_filename == "<string>" for code in marked)


def test_graph_break_around_eager_chip_kernels_gives_the_cpu_result():
    def fn(a):
        scale = a.abs().max().item()  # data-dependent: a graph break, the chip's kernels run eagerly
        return (a / scale).exp().sum()

    counter = CompileCounterWithBackend("inductor")
    x = torch.randn(4, 6)
    result = torch.compile(fn, backend=counter)(x.to("toychip"))
    torch.testing.assert_close(result.cpu(), fn(x))
    assert counter.frame_count == 2  # before and after the break; none for the chip's kernels
