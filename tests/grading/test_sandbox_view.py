"""The sandbox sees nothing it was not given: other copies of the course, the grader's
/proc entries and the parent process are out of reach, as root and as an ordinary user.

These need bubblewrap (see tests/helpers/bubblewrap_required.py).
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

from grader import chapters
from grader.grading.harness import SOLUTIONS_DIR, grade_file
from grader.sandbox import filesystem_view
from grader.sandbox.confinement import Limits, confine
from grader.sandbox.driver import Task, run_in_sandbox
from bubblewrap_required import bubblewrap  # noqa: F401  (autouse)
from notebook_builders import write_answers_only

COURSE = SOLUTIONS_DIR.parent
LIMITS = Limits(cell_timeout_s=60, task_timeout_s=60, memory_bytes=4 * 2**30)
OTHER_USER = 61999   # an ordinary uid with no files of its own; used when the suite runs as root


@pytest.fixture
def planted_copies(tmp_path):
    """Copies of what a cheater looks for, where an instructor's machine has them: the
    reference solutions, an instructor notebook with its solutions, the hidden-case seed."""
    places = [Path.home() / ".course-backup", Path("/tmp") / f"old-release-{os.getpid()}",
              COURSE.parent / f"{COURSE.name}-copy-{os.getpid()}"]
    places = [p for p in places if os.access(p.parent, os.W_OK)]   # an ordinary user: home and /tmp
    for place in places:
        (place / "solutions").mkdir(parents=True, exist_ok=True)
        shutil.copy(SOLUTIONS_DIR / "ch03_fx.py", place / "solutions" / "ch03_fx.py")
        (place / "source" / "03_fx").mkdir(parents=True, exist_ok=True)
        (place / "source" / "03_fx" / "03_fx.ipynb").write_text('"### BEGIN SOLUTION"')
        (place / ".grader_seed").write_text("12345")
    yield places
    for place in places:
        shutil.rmtree(place, ignore_errors=True)


# Walks the whole file system (the planted places first), for at most 40 s; found
# reference solutions answer the exercise, so a find is worth full points.
HUNT = textwrap.dedent("""
    import os, time
    def _hunt(roots, budget_s=40.0):
        found, start = {"solutions": [], "source": [], "seed": []}, time.monotonic()
        for root in roots:
            for folder, dirs, files in os.walk(root):
                if time.monotonic() - start > budget_s:
                    return found
                dirs[:] = [d for d in dirs if os.path.join(folder, d) not in ("/proc", "/sys", "/dev")]
                if os.path.basename(folder) == "solutions" and "ch03_fx.py" in files:
                    found["solutions"].append(os.path.join(folder, "ch03_fx.py"))
                    return found
                if "03_fx.ipynb" in files and os.path.basename(folder) == "03_fx":
                    found["source"].append(folder)
                if ".grader_seed" in files:
                    found["seed"].append(folder)
        return found
    FOUND = _hunt([__ROOTS__, "/"])
    def count_ops(gm):
        for path in FOUND["solutions"]:
            namespace = {}
            exec(open(path).read(), namespace)
            return namespace["count_ops"](gm)
        return {}
""")


def hunt_points(planted: list[Path], folder: Path) -> tuple[int, str]:
    """Points the hunting answer scores on 03.op_census, and the isolation it was graded under."""
    roots = ", ".join(repr(str(p.parent)) for p in planted)
    path = write_answers_only(folder / "hunt.ipynb", {"03.op_census": HUNT.replace("__ROOTS__", roots)})
    submission = grade_file(path, seed=11, limits=LIMITS)
    by_id = {r.exercise_id: r for r in submission.exercises}
    return by_id["03.op_census"].points, submission.isolation


def test_an_answer_that_hunts_the_file_system_for_solutions_finds_none(planted_copies, tmp_path):
    points, isolation = hunt_points(planted_copies, tmp_path)
    assert isolation.startswith("bubblewrap") and points == 0


def test_without_bubblewrap_the_same_hunt_scores_full_points(planted_copies, tmp_path, monkeypatch):
    """The attack above is real: a deny list (or no namespaces at all) lets it through."""
    monkeypatch.setattr(filesystem_view, "bwrap", lambda: None)
    points, isolation = hunt_points(planted_copies, tmp_path)
    assert "bubblewrap is not installed" in isolation
    assert points == chapters.get("03.op_census").points


PROBE = textwrap.dedent("""
    import ctypes, json, os, socket
    def _readable(path):
        try:
            with open(path, "rb") as f:
                return len(f.read()) > 0
        except OSError:
            return False
    def _exists(path):
        return os.path.lexists(path)
    def _cwd_of(pid):
        try:
            return os.readlink(f"/proc/{{pid}}/cwd")
        except OSError:
            return None
    def _can_connect():
        try:
            socket.create_connection(("1.1.1.1", 53), timeout=2).close()
            return True
        except OSError:
            return False
    def _can_write(path):
        try:
            with open(path, "a"):
                return True
        except OSError:
            return False
    libc = ctypes.CDLL(None, use_errno=True)
    visible = [int(p) for p in os.listdir("/proc") if p.isdigit()]
    observed = {{
        "grader_environ": _readable("/proc/{grader}/environ"),
        "grader_cwd": _cwd_of({grader}),
        "visible_cwds": sorted({{c for c in map(_cwd_of, visible) if c}}),
        "ptrace_grader": libc.ptrace(16, {grader}, 0, 0) == 0,
        "ptrace_parent": libc.ptrace(16, os.getppid(), 0, 0) == 0,
        "paths": {{p: _exists(p) for p in {paths}}},
        "network": _can_connect(),
        "write_package": _can_write(os.path.join(os.path.dirname(__import__("toychip").__file__), "__init__.py")),
        "solutions_import": __import__("importlib").util.find_spec("solutions") is not None,
        "uid": os.getuid(),
    }}
    print("PROBE " + json.dumps(observed))
    def count_ops(gm):
        return {{}}
""")

HOME_FILE = Path.home() / f".grader-probe-{os.getpid()}"
HIDDEN_PATHS = ["/home", "/work", "/srv", "/mnt", str(COURSE), str(SOLUTIONS_DIR), str(HOME_FILE)]


def probe(grader_pid: int) -> dict:
    """Run the probe cell in the sandbox; what it could see and do."""
    exercise = chapters.get("03.op_census")
    source = PROBE.format(grader=grader_pid, paths=HIDDEN_PATHS)
    task = Task(0, exercise.function, exercise.produce_name, exercise.public_cases()[0].build())
    report = run_in_sandbox([(0, source)], [task], LIMITS)
    line = next(l for l in report.output_tail.splitlines() if l.startswith("PROBE "))
    return {"isolation": report.isolation, **json.loads(line[len("PROBE "):])}


def assert_sees_nothing_it_was_not_given(observed: dict):
    assert observed["isolation"].startswith("bubblewrap")
    assert not observed["grader_environ"] and observed["grader_cwd"] is None
    assert not any(str(COURSE) in cwd for cwd in observed["visible_cwds"]), observed["visible_cwds"]
    assert not observed["ptrace_grader"] and not observed["ptrace_parent"]
    assert not any(observed["paths"].values()), observed["paths"]
    assert not observed["network"]
    assert not observed["write_package"]
    assert not observed["solutions_import"]


@pytest.fixture
def file_in_home():
    HOME_FILE.write_text("an instructor's file")
    yield
    HOME_FILE.unlink()


def test_the_sandbox_cannot_reach_the_grader_process_the_network_or_other_folders(file_in_home):
    assert_sees_nothing_it_was_not_given(probe(os.getpid()))


PROBE_AS_USER = textwrap.dedent("""
    import json, os, sys
    sys.path.insert(0, {tests!r})
    from test_sandbox_view import probe
    print("RESULT " + json.dumps(probe(os.getpid())))
""")


def run_as_ordinary_user(argv: list[str], extra_env: dict | None = None) -> subprocess.CompletedProcess:
    """Run ``argv`` as an ordinary user: this one if the suite is not root, else a uid of
    its own (confine() keeps the interpreter reachable through a root-only home folder)."""
    work = Path(tempfile.mkdtemp(prefix="grader-ordinary-user-"))
    # Temporary folders of this run only: pytest's /tmp/pytest-of-USER (and Inductor's
    # /tmp/torchinductor_USER) left by another uid on a shared machine would stop the run.
    (work / "tmp").mkdir()
    env = {"PATH": os.environ["PATH"], "HOME": str(work), "TMPDIR": str(work / "tmp"), "USER": "learner",
           "LOGNAME": "learner", "PYTHONDONTWRITEBYTECODE": "1",
           "PYTHONPATH": str(Path(__file__).parents[1] / "helpers"), **(extra_env or {})}
    preexec = None
    if os.geteuid() == 0:
        os.chown(work, OTHER_USER, OTHER_USER)
        os.chown(work / "tmp", OTHER_USER, OTHER_USER)
        (work / "staging").mkdir()
        preexec = confine(Limits(memory_bytes=16 * 2**30, max_processes=4096, cpu_seconds=3600),
                          OTHER_USER, str(work / "staging"))
    try:
        return subprocess.run(argv, env=env, cwd=COURSE, capture_output=True, text=True, timeout=1500,
                              preexec_fn=preexec)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def test_an_ordinary_user_gets_the_same_view(file_in_home):
    """Without root, bubblewrap builds the same view through a user namespace."""
    run = run_as_ordinary_user([sys.executable, "-c", PROBE_AS_USER.format(tests=str(Path(__file__).parent))])
    line = next((l for l in run.stdout.splitlines() if l.startswith("RESULT ")), None)
    assert line is not None, run.stdout[-2000:] + run.stderr[-4000:]
    observed = json.loads(line[len("RESULT "):])
    assert observed["uid"] == filesystem_view.SANDBOX_UID
    assert_sees_nothing_it_was_not_given(observed)


def test_every_attack_fails_for_an_ordinary_user_too():
    """The attack notebooks, the file-system hunt and the confined analysis, graded by an
    ordinary user (an instructor's laptop, JupyterHub)."""
    if os.geteuid() != 0:
        pytest.skip("this run is an ordinary user's: its own test_attacks.py, test_confined_analysis.py and "
                    "test_sandbox_view.py are these tests as an ordinary user")
    here = Path(__file__).parent
    run = run_as_ordinary_user(
        [sys.executable, "-m", "pytest", "-q", "-n", "2", "-p", "no:cacheprovider",
         str(here / "test_attacks.py"), str(here / "test_confined_analysis.py"),
         str(here / "test_sandbox_view.py"), "-k", "not ordinary_user"],
        {"GRADER_REQUIRE_BUBBLEWRAP": "1"})
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-3000:]
