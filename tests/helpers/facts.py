"""Facts about torch that the course's prose relies on, each pinned by one test.

A fact test carries ``@backs(PLACE, PHRASE)``: the file whose sentence relies on the fact
(a notebook, or a library module whose docstring states it) and a phrase of that
sentence, as written there. When torch changes and the test fails, its message names the
sentence to update; ``tests/facts/test_phrases.py`` checks that every phrase is still
where its test says, so a sentence cannot change without its test noticing.
"""
import ast
import contextlib
import functools
import json
import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch._dynamo.eval_frame import _debug_get_cache_entry_list


def backs(place: str, phrase: str):
    def decorate(test):
        @functools.wraps(test)
        def checked(*args, **kwargs):
            try:
                return test(*args, **kwargs)
            except AssertionError as error:
                raise AssertionError(f"torch changed: update the sentence with 「{phrase}」 in {place} ({error})") from error
        return checked
    return decorate


@contextlib.contextmanager
def logged(logger_name: str):
    """The records ``logger_name`` emits inside the block (the facts tests read torch's log texts)."""
    records = []
    handler = logging.Handler()
    handler.emit = records.append
    logger = logging.getLogger(logger_name)
    logger.addHandler(handler)
    try:
        yield records
    finally:
        logger.removeHandler(handler)


def torch_trace_logs(program: str, trace_dir: Path) -> list[Path]:
    """Run ``program`` in a fresh interpreter with ``TORCH_TRACE=trace_dir``; the logs it wrote."""
    subprocess.run([sys.executable, "-c", program], env={**os.environ, "TORCH_TRACE": str(trace_dir)},
                   check=True, capture_output=True, timeout=300)
    return sorted(trace_dir.iterdir())


def tlparse_report(log: Path, report: Path) -> dict:
    """tlparse's report of ``log`` written to ``report``; returns its compile_directory.json.

    tlparse is a console script of the course's environment: beside this Python, or on PATH."""
    tlparse = shutil.which("tlparse", path=os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")]))
    assert tlparse, "tlparse is a dependency of the course (pyproject.toml)"
    subprocess.run([tlparse, str(log), "-o", str(report), "--no-browser"], check=True, capture_output=True, timeout=120)
    return json.loads((report / "compile_directory.json").read_text(encoding="utf-8"))


@pytest.fixture
def fresh_dynamo():
    """Dynamo's caches emptied before and after each test of a module that uses it (pytestmark)."""
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def recording(graphs: list):
    """A backend that keeps each graph it gets and runs it as is."""
    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward
    return backend


def guards_text(fn, index: int = 0) -> str:
    """The guards of ``fn``'s cache entry ``index`` (0 is the newest), as Dynamo prints them."""
    return str(_debug_get_cache_entry_list(fn)[index].guard_manager)


def function_source(path: Path, name: str) -> str:
    """A top-level function's source, read without importing its module (importing Inductor is slow)."""
    text = path.read_text(encoding="utf-8")
    [function] = [node for node in ast.parse(text).body if isinstance(node, ast.FunctionDef) and node.name == name]
    return ast.get_source_segment(text, function)
