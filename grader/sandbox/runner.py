"""Run a submission inside the sandbox: its code cells in order, then one task per case.

A task calls ``produce(namespace[function], built)``. The analysis process runs no cells:
its namespace holds the learner's artifacts as ``values``, and its tasks' ``produce`` is
an exercise's ``analyze``.

The trusted side writes ``request.pt`` (cells, tasks with their inputs) into the work
folder and reads back one ``task-N.pt`` per task plus progress lines on a pipe. Both
are only *claims*: the trusted side enforces the deadlines and re-checks every outcome.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import torch

from .calls import call_analysis, call_learner, describe_exception, resolve
from .graph_codec import unpack


class Progress:
    """Line-delimited JSON events on the pipe the trusted side listens to."""

    def __init__(self, fd: int):
        self.stream = os.fdopen(fd, "w", buffering=1, encoding="utf-8")

    def __call__(self, **event) -> None:
        self.stream.write(json.dumps(event) + "\n")
        self.stream.flush()


def _shell():
    """An IPython shell, so cells with magics and display() run as in Jupyter."""
    import matplotlib

    matplotlib.use("Agg")
    from IPython.core.interactiveshell import InteractiveShell

    return InteractiveShell.instance()


def _run_cells(cells, report: Progress) -> dict:
    """Run the submission's cells in order; returns the namespace they leave."""
    shell = _shell()
    for index, source in cells:
        report(step="cell", id=index, state="start")
        result = shell.run_cell(source, store_history=False, silent=False)
        error = result.error_in_exec or result.error_before_exec
        report(step="cell", id=index, state="done", error=None if error is None else describe_exception(error))
    return shell.user_ns


def main(workdir: str, progress_fd: int) -> None:
    work = Path(workdir)
    report = Progress(progress_fd)
    request = torch.load(work / "request.pt", weights_only=False)  # written by the trusted side
    namespace = _run_cells(request["cells"], report) if request["cells"] else {}
    namespace.update(unpack(request["values"]))
    for task in request["tasks"]:
        report(step="task", id=task["id"], state="start")
        # No in-process deadline: the driver kills an overrunning process instead.
        if task["value"] is not None:
            outcome = call_analysis(resolve(task["produce"]), namespace[task["value"]], unpack(task["built"]))
        else:
            outcome = call_learner(namespace.get(task["function"]), resolve(task["produce"]),
                                   unpack(task["built"]), timeout_s=None)
        (work / f"task-{task['id']}.pt").write_bytes(outcome)
        report(step="task", id=task["id"], state="done")
    report(step="finished")
    os._exit(0)  # skip interpreter teardown: learner atexit hooks must not run after the tasks
