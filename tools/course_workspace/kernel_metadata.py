"""The learner's copies carry their kernel's ``language_info``.

When a notebook's ``language_info`` differs from what its kernel reports (the Python
version, the lexer names), JupyterLab writes the kernel's into the notebook as it opens
it, so the notebook shows as modified (●) before the learner touched anything. The
course's notebooks cannot know the learner's Python; their copies are written with this
interpreter's, the one ``./course`` starts kernels from.
"""
from __future__ import annotations

import json
from pathlib import Path


def kernel_language_info() -> dict:
    """What an IPython kernel on this interpreter reports as its ``language_info``."""
    from ipykernel.ipkernel import IPythonKernel

    return dict(IPythonKernel.language_info)


def write_for_this_kernel(source: Path, target: Path) -> None:
    """Copy the notebook ``source`` to ``target`` with this kernel's ``language_info``."""
    notebook = json.loads(source.read_text(encoding="utf-8"))
    notebook.setdefault("metadata", {})["language_info"] = kernel_language_info()
    target.write_text(json.dumps(notebook, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
