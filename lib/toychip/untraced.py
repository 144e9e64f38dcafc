"""Dynamo never traces the chip's own Python: its kernels are called by the dispatcher.

While a ``torch.compile``'d function runs, Dynamo's frame hook sees every Python frame that
starts, including eager code between graphs (a graph break). The chip's kernels are
Python functions that PyTorch's dispatcher calls from C++, so without this Dynamo would try
to compile a kernel's frame as if the user had written it -- and run it on fake tensors.
Real ports never meet this: their kernels are C++. :func:`skip_package` marks each code
object of the chip's modules with Dynamo's frame strategy "skip, and skip what it calls",
through ``torch._C`` (cheap; ``import torch._dynamo`` is not): what Dynamo's own
``skip_code`` does. Code generated later (a compiled graph's source) runs with Dynamo off.
"""
from __future__ import annotations

import inspect
import sys
import types

from torch._C._dynamo import eval_frame


def _code_objects(code: types.CodeType):
    """``code`` and every function body nested in it (closures, lambdas, comprehensions)."""
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _code_objects(const)


def _members(value, module: types.ModuleType):
    """A module's value as the functions it holds: a class of the module gives its methods
    (a property its accessors); decorators are looked through (``__wrapped__``)."""
    if isinstance(value, type) and value.__module__ == module.__name__:
        for member in vars(value).values():
            if isinstance(member, property):
                yield from (member.fget, member.fset, member.fdel)
            else:
                yield getattr(member, "__func__", member)  # staticmethod, classmethod
    else:
        yield value


def _functions(module: types.ModuleType):
    """The functions a module defines, its classes' methods included. Only code written in
    the module (or generated for its classes, ``<string>``: dataclasses): a decorator's
    wrapper (``contextlib.contextmanager``'s) is shared by every function it decorates."""
    for value in vars(module).values():
        for member in _members(value, module):
            member = inspect.unwrap(member) if hasattr(member, "__wrapped__") else member  # functools.cache too
            if (isinstance(member, types.FunctionType) and member.__module__ == module.__name__
                    and member.__code__.co_filename in (module.__file__, "<string>")):
                yield member


def skip_package(package: str) -> int:
    """Mark every loaded module of ``package``; returns how many code objects were marked
    (a function under two names counts once)."""
    strategy = eval_frame._FrameExecStrategy(eval_frame._FrameAction.SKIP, eval_frame._FrameAction.SKIP)
    codes = {code
             for name, module in list(sys.modules.items())
             if module is not None and (name == package or name.startswith(package + "."))
             for function in _functions(module)
             for code in _code_objects(function.__code__)}
    for code in codes:
        eval_frame.set_code_exec_strategy(code, strategy)
    return len(codes)
