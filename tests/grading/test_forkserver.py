"""Analyses forked from the pre-imported server start as clean as a fresh process: nothing a
child left behind (files, running processes) reaches the next child, no child can stop,
inspect or ptrace the server, each child has the limits it was given (not those of the
call that started the server), a child's exit is reported as such, a server that died is
replaced, and where none starts the analyses get freshly started processes.

Needs bubblewrap (see tests/helpers/bubblewrap_required.py).
"""
import json
import textwrap

import pytest

from grader import chapters
from grader.grading.feedback import cell_notes
from grader.sandbox import driver
from grader.sandbox.confinement import Limits
from grader.sandbox.driver import Task, run_in_sandbox
from grader.sandbox.forkserver import ForkServerError
from grader.sandbox.outcome import Artifact, ProcessEnd
from bubblewrap_required import bubblewrap  # noqa: F401  (autouse)

LIMITS = Limits(cell_timeout_s=60, task_timeout_s=60, memory_bytes=4 * 2**30)

LEAVE_TRACES = textwrap.dedent("""
    import os, subprocess, sys, time
    open("/tmp/left-behind", "w").write("x")
    open(os.path.expanduser("~/left-behind"), "w").write("x")
    subprocess.Popen([sys.executable, "-c", "import time\\nwhile True:\\n    open('/tmp/still-here', 'w').write('x')\\n"
                      "    time.sleep(0.05)"], start_new_session=True)
    time.sleep(0.5)
""")

LOOK_AROUND = textwrap.dedent("""
    import json, os
    print("SEEN " + json.dumps({"tmp": sorted(os.listdir("/tmp")),
                                "home": sorted(os.listdir(os.path.expanduser("~"))),
                                "others": sorted(int(p) for p in os.listdir("/proc")
                                                 if p.isdigit() and int(p) not in (1, os.getpid()))}))
""")

TOUCH_THE_SERVER = textwrap.dedent("""
    import ctypes, json, os, signal
    def _can(action):
        try:
            action()
            return True
        except OSError:
            return False
    seen = {"environ": _can(lambda: open("/proc/1/environ", "rb").read()),
            "memory": _can(lambda: open("/proc/1/mem", "rb").read(1)),
            "ptrace": ctypes.CDLL(None, use_errno=True).ptrace(16, 1, 0, 0) == 0}
    for number in (signal.SIGSTOP, signal.SIGKILL, signal.SIGTERM, signal.SIGINT):
        os.kill(1, number)  # the kernel drops these for the namespace's PID 1
    print("SEEN " + json.dumps(seen))
""")

SHOW_LIMITS = textwrap.dedent("""
    import json, resource
    print("SEEN " + json.dumps({"memory": resource.getrlimit(resource.RLIMIT_AS)}))
""")

DEFINE = "\ndef count_ops(gm):\n    return {}\n"


def run_census(source: str, limits: Limits = LIMITS, preforked: bool = True):
    """Run the cell ``source`` (which also defines ``count_ops``), then one trivial task."""
    exercise = chapters.get("03.op_census")
    task = Task(0, exercise.function, exercise.produce_name, exercise.public_cases()[0].build())
    return run_in_sandbox([(0, source + DEFINE)], [task], limits, preforked=preforked)


def forked_run(source: str, limits: Limits = LIMITS) -> dict:
    """Run ``source`` in a forked process, expecting the task to be done; what it printed after SEEN."""
    report = run_census(source, limits)
    assert isinstance(report.outcomes[0], Artifact), (report.outcomes, report.output_tail)
    line = next((l for l in report.output_tail.splitlines() if l.startswith("SEEN ")), "SEEN {}")
    return json.loads(line[len("SEEN "):])


def current_server():
    return driver._server


def test_nothing_a_forked_process_leaves_behind_reaches_the_next():
    forked_run(LEAVE_TRACES)
    server = current_server()
    assert server is not None and server.alive()
    seen = forked_run(LOOK_AROUND)
    assert current_server() is server  # cleaned up by the same server, not by starting another
    assert seen["tmp"] == [] and "left-behind" not in seen["home"], seen
    assert seen["others"] == [], seen


def test_a_forked_process_cannot_stop_inspect_or_ptrace_the_server():
    seen = forked_run(TOUCH_THE_SERVER)
    assert seen == {"environ": False, "memory": False, "ptrace": False}, seen
    server = current_server()
    assert server.alive()
    forked_run(LOOK_AROUND)
    assert current_server() is server


def test_each_forked_process_has_its_own_limits_even_above_those_the_server_started_with():
    driver._retire_server()
    # both above the 3.4 GiB of address space a CUDA build of torch maps at import
    lower, higher = (Limits(cell_timeout_s=60, task_timeout_s=60, memory_bytes=gib * 2**30) for gib in (5, 7))
    assert forked_run(SHOW_LIMITS, lower)["memory"] == [lower.memory_bytes] * 2
    server = current_server()
    assert forked_run(SHOW_LIMITS, higher)["memory"] == [higher.memory_bytes] * 2
    assert current_server() is server


@pytest.mark.parametrize("preforked", [True, False], ids=["forked", "fresh"])
def test_a_process_that_exits_is_reported_with_its_exit_code_not_as_a_timeout(preforked):
    report = run_census("import os\nos._exit(3)\n", preforked=preforked)
    assert report.skipped_cells == {0: ProcessEnd(exit_code=3)}, report.skipped_cells
    assert cell_notes(report.skipped_cells, {}) == ["第 1 个单元格导致沙箱进程以退出码 3 结束，评分时跳过了它。"]


def test_a_server_that_died_is_replaced():
    forked_run(LOOK_AROUND)
    dead = current_server()
    dead.process.kill()
    dead.process.wait()
    assert forked_run(LOOK_AROUND)["tmp"] == []
    assert current_server() is not dead and current_server().alive()


def test_where_no_server_starts_analyses_get_fresh_processes(monkeypatch):
    def refuse(*args, **kwargs):
        raise ForkServerError("the fork server did not start: a test")

    driver._retire_server()
    monkeypatch.setattr(driver, "ForkServer", refuse)
    monkeypatch.setattr(driver, "_server_refused", False)
    assert forked_run(LOOK_AROUND)["tmp"] == []
    assert driver._server is None and driver._server_refused
