"""In a notebook without any C++ compiler, a cell that compiles ends with one Chinese
paragraph saying what is missing, instead of Inductor's traceback."""
from __future__ import annotations

import sys
from typing import Callable


def explain_in_notebooks(compiler_missing: Callable[[BaseException], bool], message: Callable[[], str]) -> None:
    """Register the explanation with IPython, when this process is an IPython kernel: an error
    for which ``compiler_missing`` holds prints ``message()`` instead of its traceback."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    if shell is None or shell.custom_exceptions:
        return

    def show(shell, kind, error, traceback, tb_offset=None):
        if compiler_missing(error):
            print(message(), file=sys.stderr)
            return None
        return shell.showtraceback((kind, error, traceback), tb_offset=tb_offset)

    shell.set_custom_exc((Exception,), show)
