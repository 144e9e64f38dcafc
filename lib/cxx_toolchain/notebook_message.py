"""In a notebook without any C++ compiler, a cell that compiles ends with one Chinese
paragraph saying what is missing, instead of Inductor's traceback."""
from __future__ import annotations

import sys

from . import compiler_missing, missing_message


def _show(shell, kind, error, traceback, tb_offset=None):
    if compiler_missing(error):
        print(missing_message(), file=sys.stderr)
        return None
    return shell.showtraceback((kind, error, traceback), tb_offset=tb_offset)


def explain_in_notebooks() -> None:
    """Register the explanation with IPython, when this process is an IPython kernel."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    if shell is not None and not shell.custom_exceptions:
        shell.set_custom_exc((Exception,), _show)
