"""The trusted side's driver of the sandbox: deadlines, kills, restarts, safe read-back.

A submission's cells and tasks run in one sandbox process. If a step overruns its
deadline or takes the process down (an endless loop that swallows interrupts,
``os._exit``, exhausted memory), the process group is killed, the step is blamed, and
a fresh process runs what is left — skipping a blamed cell, failing a blamed task — so
one bad exercise never costs the others their points.
"""
from __future__ import annotations

import atexit
import importlib.util
import itertools
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

import cxx_toolchain

from .calls import read_outcome
from . import filesystem_view
from .confinement import Limits, confine, strong_isolation_available
from .forkserver import ForkedProcess, ForkServer, ForkServerError, emptied
from .graph_codec import pack
from .outcome import Failure, FailureKind, Outcome, ProcessEnd

OUTPUT_TAIL_BYTES = 4000
EXIT_GRACE_S = 5.0   # between a process closing its progress pipe and its exit status
SANDBOX_UID_BASE = 61000
SANDBOX_UIDS = 4000
_attempts = itertools.count(1)   # attempts started by this process, across every run_in_sandbox call
INDUCTOR_CACHE = ".inductor"   # in the attempt's home
ZIG_CACHE = ".zig"             # in the attempt's home: zig's C++ runtime, when Inductor compiles with zig


@dataclass
class Task:
    """Call ``function`` (a name the cells define) through ``produce`` on ``built``. An
    analysis task names a ``value`` instead: ``produce`` (an exercise's analyze) is called on
    it. Tasks of one ``function`` stand or fall together when one of them overruns."""

    id: int
    function: str
    produce: str  # "module:qualname" of the produce (or analyze) function
    built: dict
    value: str | None = None


@dataclass
class SandboxReport:
    outcomes: dict[int, Outcome]   # task id -> outcome
    cell_errors: dict[int, str] = field(default_factory=dict)
    skipped_cells: dict[int, ProcessEnd] = field(default_factory=dict)   # cell index -> how it ended the process
    isolation: str = ""
    output_tail: str = ""


@dataclass(frozen=True)
class Isolation:
    """How sandbox processes are confined on this machine; named in every report."""

    allowlist: bool          # bubblewrap's allowlisted view (see .filesystem_view)
    separate_uid: bool       # root without bubblewrap: namespaces, hidden folders, a throw-away uid
    description: str


def choose_isolation() -> Isolation:
    """bubblewrap when it works here (root or not); otherwise what the process can do alone."""
    if filesystem_view.bwrap() is not None:
        return Isolation(True, False, "bubblewrap: allowlisted read-only file system, private /tmp, "
                                      "no network, own PID namespace, no capabilities, rlimits")
    missing = f"bubblewrap is not installed or cannot run here ({filesystem_view.INSTALL_HINT})"
    if strong_isolation_available():
        return Isolation(False, True, "process group, rlimits, network namespace, hidden solutions "
                                      f"folder, separate uid; {missing}: other copies of the course are readable")
    return Isolation(False, False, f"process group and rlimits only; {missing}: the whole file system is readable")


def _import_roots() -> str:
    """Where this process imports the course's packages from, so that the sandbox runs the
    very same code (not whatever copy an editable install happens to point at)."""
    roots = []
    for package in ("grader", "course_models"):
        root = str(Path(importlib.util.find_spec(package).origin).parent.parent)
        if root not in roots:
            roots.append(root)
    return os.pathsep.join(roots)


def _clean_environment(home: str, import_path: str, threads: int | None) -> dict:
    """Only what Python needs; every place a library writes to (temporary files, Inductor's
    caches and precompiled headers, which it keys by user name) lies inside ``home``, which
    is deleted with the attempt, so no submission sees another's files. ``home`` and
    ``import_path`` are named as the sandbox process sees them."""
    keep = ("PATH", "LANG", "LC_ALL", "TZ", "OMP_NUM_THREADS")
    env = {k: os.environ[k] for k in keep if k in os.environ}
    if threads is not None:
        env["OMP_NUM_THREADS"] = str(threads)
    env.update(HOME=home, TMPDIR=f"{home}/tmp", USER="sandbox", LOGNAME="sandbox",
               PYTHONPATH=import_path, MPLCONFIGDIR=f"{home}/.mpl", PYTHONDONTWRITEBYTECODE="1",
               # unbuffered: the driver kills the process as soon as its last task is done
               PYTHONUNBUFFERED="1", PYTHONNOUSERSITE="1",
               PYTHONHASHSEED="0", MPLBACKEND="Agg", TORCHINDUCTOR_CACHE_DIR=f"{home}/{INDUCTOR_CACHE}",
               # Inductor compiles in this process: a pool of compile workers, each importing
               # torch, costs more than the few small graphs a submission compiles.
               TORCHINDUCTOR_COMPILE_THREADS="1",
               # Its precompiled header lives under TMPDIR, new for every attempt: building it
               # took 8 s of g++ even when the warm cache already held every kernel.
               TORCHINDUCTOR_CPP_CACHE_PRECOMPILE_HEADERS="0",
               **{cxx_toolchain.ZIG_CACHE_VARIABLE: f"{home}/{ZIG_CACHE}"})
    return env


def _copy_tree(source: Path, target: Path, uid: int | None) -> None:
    """Copy a cache (never link it: the sandbox may write to what it is given)."""
    shutil.copytree(source, target, symlinks=True, dirs_exist_ok=True)
    if uid is not None:
        for folder, dirs, files in os.walk(target):
            for name in [folder, *(os.path.join(folder, n) for n in dirs + files)]:
                os.lchown(name, uid, uid)


def _seed_zig_cache(home: Path, uid: int | None) -> None:
    """Without a system compiler, Inductor compiles with zig, which must write to the cache
    holding its C++ runtime: each sandbox gets a copy of this machine's (about 90 MB, built
    once by ``./course``), or every attempt would spend 40 s building it again."""
    if cxx_toolchain.current().kind == "zig" and cxx_toolchain.zig_cache_dir().is_dir():
        _copy_tree(cxx_toolchain.zig_cache_dir(), home / ZIG_CACHE, uid)


class _Attempt:
    """One sandbox process (started afresh, or forked by ``server``) and its progress stream."""

    def __init__(self, work: Path, output: Path, request: dict, limits: Limits, isolation: Isolation,
                 uid: int | None, server: ForkServer | None = None):
        self.work = work
        torch.save(request, work / "request.pt")
        home = work / "home"
        (home / "tmp").mkdir(parents=True, exist_ok=True)
        if limits.inductor_cache and Path(limits.inductor_cache).is_dir():
            _copy_tree(Path(limits.inductor_cache), home / INDUCTOR_CACHE, uid)
        _seed_zig_cache(home, uid)
        if uid is not None:
            for path in (work, home, home / "tmp", work / "request.pt"):
                os.chown(path, uid, uid)
        read_fd, write_fd = os.pipe()
        self.output = open(output, "wb")
        if server is not None:
            self.process = server.start(write_fd, self.output.fileno(), limits)
        else:
            self.process = self._popen(work, write_fd, limits, isolation, uid)
        os.close(write_fd)
        self.reader = os.fdopen(read_fd, "rb", buffering=0)
        self.buffer = b""

    def _popen(self, work: Path, write_fd: int, limits: Limits, isolation: Isolation, uid: int | None):
        staging = work.parent / f"staging-{work.name}"
        staging.mkdir()
        if isolation.allowlist:
            argv = filesystem_view.command(work, ["-m", "grader.sandbox", filesystem_view.WORK, str(write_fd)])
            env = _clean_environment(f"{filesystem_view.WORK}/home", filesystem_view.PACKAGES, limits.threads)
        else:
            argv = [sys.executable, "-m", "grader.sandbox", str(work), str(write_fd)]
            env = _clean_environment(str(work / "home"), _import_roots(), limits.threads)
        return subprocess.Popen(
            argv, pass_fds=(write_fd,), cwd=work / "home", env=env,
            stdin=subprocess.DEVNULL, stdout=self.output, stderr=subprocess.STDOUT,
            preexec_fn=confine(limits, uid, str(staging)))

    def next_event(self, deadline: float) -> dict | None:
        """The next progress event, or None at the deadline or when the process ended."""
        while True:
            while b"\n" in self.buffer:
                line, self.buffer = self.buffer.split(b"\n", 1)
                try:
                    event = json.loads(line)
                except ValueError:
                    continue  # learner code may scribble on the pipe
                if isinstance(event, dict):
                    return event
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([self.reader], [], [], remaining)[0]:
                return None
            chunk = self.reader.read(65536)
            if not chunk:
                return None
            self.buffer += chunk

    def watch(self, limits: Limits, task_ids: set[int], report: "SandboxReport"):
        """Follow progress until every task is done, a deadline passes or the process
        ends; returns (done task ids, the step running when it stopped, whether its
        deadline passed)."""
        current, done = None, set()
        deadline = time.monotonic() + limits.cell_timeout_s
        while not done >= task_ids:
            event = self.next_event(deadline)
            if event is None:
                return done, current, time.monotonic() >= deadline
            if event.get("step") == "finished":
                break
            step, state, identifier = event.get("step"), event.get("state"), event.get("id")
            if state == "start":
                current = (step, identifier)
                budget = limits.cell_timeout_s if step == "cell" else limits.task_timeout_s
                deadline = time.monotonic() + budget
            elif state == "done":
                if step == "cell" and event.get("error"):
                    report.cell_errors[identifier] = str(event["error"])[:500]
                elif step == "task":
                    done.add(identifier)
                current = None
        return done, current, False

    def ended(self, within: float) -> bool:
        """Whether the process ends within ``within`` seconds. Its progress pipe closes as it
        exits, a moment before its exit status can be read (a forked process's status
        comes from the server, after its clean-up)."""
        try:
            self.process.wait(timeout=within)
            return True
        except subprocess.TimeoutExpired:
            return False

    def kill(self) -> None:
        """Kill the process and everything it started, and wait for that."""
        if isinstance(self.process, ForkedProcess):
            self.process.kill()
        else:
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            self.process.wait()
        self.reader.close()
        self.output.close()

    def end(self, timed_out: bool) -> ProcessEnd:
        """How the process stopped: over its deadline (``timed_out``), else by its exit status."""
        code = self.process.poll()
        if timed_out:
            return ProcessEnd(timed_out=True)
        if code is not None and code < 0:
            return ProcessEnd(signal=signal.Signals(-code).name)
        return ProcessEnd(exit_code=code)


_server: ForkServer | None = None   # this process's fork server, started on first use
_server_refused = False             # it would not start here: start processes afresh


def _fork_server(limits: Limits, isolation: Isolation, modules: list[str]) -> ForkServer | None:
    """The fork server for analyses (started, preloading ``modules``, or replaced if it
    died); None where there is no bubblewrap or it would not start."""
    global _server, _server_refused
    if not isolation.allowlist or _server_refused:
        return None
    if _server is not None and _server.alive():
        return _server
    _retire_server()
    work = Path(tempfile.mkdtemp(prefix="grader-forkserver-"))
    (work / "home").mkdir()
    _seed_zig_cache(work / "home", None)
    argv = filesystem_view.command(work, ["-m", "grader.sandbox.forkserver", "FD", filesystem_view.WORK, *modules])
    # One thread while it imports, so that no thread pool exists when it forks; each
    # child then sets its own number of threads.
    env = _clean_environment(f"{filesystem_view.WORK}/home", filesystem_view.PACKAGES, threads=1)
    try:
        _server = ForkServer(argv, env, work, confine(limits, None, final=False), _server_log(work))
    except ForkServerError:
        _server_refused = True
        _remove_server_files(work)
    return _server


def _server_log(work: Path) -> Path:
    """Where the server's own output goes: beside its work folder, which children see."""
    return work.parent / f"{work.name}.log"


def _remove_server_files(work: Path) -> None:
    shutil.rmtree(work, ignore_errors=True)
    _server_log(work).unlink(missing_ok=True)


@atexit.register
def _retire_server() -> None:
    global _server
    if _server is not None:
        _server.close()
        _remove_server_files(_server.work)
        _server = None


def _throwaway_uid() -> int:
    """A uid for the next attempt, never the one of an earlier attempt of this process: a
    process that a learner's attempt left behind (one that left the process group) must
    neither count against the next attempt's process limit nor share its uid."""
    return SANDBOX_UID_BASE + (os.getpid() * 7 + next(_attempts)) % SANDBOX_UIDS


def _kill_every_process_of(uid: int) -> None:
    """Root only: kill what is left of an attempt's throw-away uid, a daemon that called
    ``setsid`` (out of reach of ``killpg``) included."""
    for _ in range(10):
        living = [pid for pid, fields in _processes() if fields.get("Uid", "").split()[:1] == [str(uid)]
                  and not fields.get("State", "").startswith("Z")]
        if not living:
            return
        for pid in living:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.05)


def _processes():
    """(pid, fields of /proc/PID/status) for every process still there."""
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            lines = status.read_text().splitlines()
        except OSError:
            continue
        yield int(status.parent.name), dict(line.split(":\t", 1) for line in lines if ":\t" in line)


def _read_outcome(path: Path) -> Outcome:
    if not path.is_file():
        return Failure(FailureKind.NO_RESULT)
    return read_outcome(path.read_bytes())


def run_in_sandbox(cells: list[tuple[int, str]], tasks: list[Task], limits: Limits = Limits(),
                   values: dict | None = None, preforked: bool = False) -> SandboxReport:
    """Run ``cells`` then ``tasks`` in confined processes; every task gets an outcome.

    ``values`` (plain data) are put in the namespace before the tasks run. ``preforked``
    (for analyses only, never for learner cells) forks the processes from this process's
    :mod:`.forkserver`, where bubblewrap runs one.
    """
    isolation = choose_isolation()
    server = _fork_server(limits, isolation, sorted({t.produce.partition(":")[0] for t in tasks})) if preforked else None
    report = SandboxReport(outcomes={}, isolation=isolation.description)
    remaining = list(tasks)
    scratch = Path(tempfile.mkdtemp(prefix="grader-sandbox-"))
    os.chmod(scratch, 0o711)
    try:
        attempt_number = 0
        while remaining:
            attempt_number += 1
            if server is not None and not emptied(server.work):
                _retire_server()
                server = None
            work = server.work if server is not None else scratch / f"attempt-{attempt_number}"
            work.mkdir(mode=0o700, exist_ok=server is not None)
            output = scratch / f"output-{attempt_number}.txt"
            uid = _throwaway_uid() if isolation.separate_uid else None
            request = {"cells": [(i, s) for i, s in cells if i not in report.skipped_cells],
                       "tasks": [{**vars(t), "built": pack(t.built)} for t in remaining],
                       "values": pack(values or {})}
            attempt = _Attempt(work, output, request, limits, isolation, uid, server)
            done_tasks, current, overran = attempt.watch(limits, {t.id for t in remaining}, report)
            finished = done_tasks >= {t.id for t in remaining}
            timed_out = not finished and (overran or not attempt.ended(within=EXIT_GRACE_S))
            attempt.kill()
            if uid is not None:
                _kill_every_process_of(uid)
            if limits.collect_cache and (work / "home" / INDUCTOR_CACHE).is_dir():
                _copy_tree(work / "home" / INDUCTOR_CACHE, Path(limits.inductor_cache), None)
            report.output_tail = output.read_bytes()[-OUTPUT_TAIL_BYTES:].decode(errors="replace")
            for task in list(remaining):
                if task.id in done_tasks:
                    report.outcomes[task.id] = _read_outcome(work / f"task-{task.id}.pt")
                    remaining.remove(task)
            if server is not None and not server.alive():
                _retire_server()
                server = None
            if finished or not remaining:
                break
            end = attempt.end(timed_out)
            if current is None:
                for task in remaining:
                    report.outcomes[task.id] = Failure(FailureKind.CRASHED_BEFORE, end=end)
                break
            kind, identifier = current
            if kind == "cell":
                report.skipped_cells[identifier] = end
            else:
                blamed = next(t for t in remaining if t.id == identifier)
                report.outcomes[identifier] = (Failure(FailureKind.TIMEOUT, seconds=limits.task_timeout_s) if timed_out
                                               else Failure(FailureKind.CRASHED, end=end))
                # The same function would most likely do it again: spend no more time on it.
                for task in remaining:
                    if task.function == blamed.function and task.id != identifier:
                        report.outcomes[task.id] = Failure(FailureKind.SKIPPED, end=end)
                remaining = [t for t in remaining if t.function != blamed.function]
    except BaseException:
        if server is not None:  # it may still be running a child for us
            _retire_server()
        raise
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return report
