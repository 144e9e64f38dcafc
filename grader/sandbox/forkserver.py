"""Analysis processes forked from a pre-imported parent, so that each skips starting
Python and importing torch, Dynamo and Inductor (chapter 01: about 6 s per submission).

Only analysis uses it: an analysis process runs no learner cell, only an exercise's
``analyze`` on plain data that came from learner code (a rebuilt FX graph, a TorchScript
program), so the parent's image holds nothing but the course's own code and every child
starts from exactly that image. Learner code always gets a freshly started process.

The server runs inside the same bubblewrap view as any sandbox process, as PID 1 of its
own PID namespace: children cannot signal it, and it is not dumpable, so they cannot
ptrace it or read its memory. It forks one child at a time; when that child ends or is
killed, it kills every other process left in the namespace and empties ``/tmp``, and the
driver empties the work folder, before the next child starts.

Protocol on a SOCK_SEQPACKET socket, one JSON message each: the driver sends ``run``
(with the child's limits and, as passed descriptors, its progress pipe and output file)
and ``kill``; the server answers ``ready`` once, then ``exit`` (the child's return code,
negative for a signal, as in :mod:`subprocess`) for every ``run``.
"""
from __future__ import annotations

import ctypes
import json
import os
import random
import select
import shutil
import signal
import socket
import subprocess
import sys
import time
import traceback

from .confinement import apply_rlimits

PRELOAD = ("torch", "torch._dynamo", "torch._inductor.compile_fx", "grader.sandbox.runner")
PR_SET_DUMPABLE = 4
READY_TIMEOUT_S = 180.0
MESSAGE_BYTES = 4096
KILL_TIMEOUT_S = 60.0


# --- the driver's side --------------------------------------------------------------

class ForkServerError(RuntimeError):
    """The server could not start or stopped answering; the driver starts processes afresh."""


class ForkServer:
    """A running server, started with ``argv`` (bubblewrap around ``python -m
    grader.sandbox.forkserver FD``, the ``FD`` placeholder replaced), and its work folder."""

    def __init__(self, argv: list[str], env: dict, work, preexec_fn, log_path):
        self.work = work
        self.control, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        argv = [str(theirs.fileno()) if a == "FD" else a for a in argv]
        with open(log_path, "wb") as log:
            self.process = subprocess.Popen(argv, pass_fds=(theirs.fileno(),), env=env, cwd="/",
                                            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                            preexec_fn=preexec_fn)
        theirs.close()
        try:
            answer = self._receive(READY_TIMEOUT_S)
        except ForkServerError:
            self.close()
            raise
        if answer.get("ready") is not True:
            self.close()
            raise ForkServerError(f"the fork server did not start: {answer.get('why')}")

    def _receive(self, timeout: float | None) -> dict:
        if not select.select([self.control], [], [], timeout)[0]:
            raise ForkServerError("the fork server stopped answering")
        data = self.control.recv(MESSAGE_BYTES)
        if not data:
            raise ForkServerError("the fork server ended")
        return json.loads(data)

    def start(self, progress_fd: int, output_fd: int, limits) -> "ForkedProcess":
        message = {"run": {"cpu_seconds": limits.cpu_seconds, "memory_bytes": limits.memory_bytes,
                           "file_bytes": limits.file_bytes, "threads": limits.threads or os.cpu_count()}}
        socket.send_fds(self.control, [json.dumps(message).encode()], [progress_fd, output_fd])
        return ForkedProcess(self)

    def alive(self) -> bool:
        return self.process.poll() is None

    def close(self) -> None:
        self.control.close()
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.process.wait()


class ForkedProcess:
    """One child of the server, with the parts of :class:`subprocess.Popen` the driver uses."""

    def __init__(self, server: ForkServer):
        self.server = server
        self.returncode: int | None = None

    def poll(self) -> int | None:
        try:
            return self.wait(timeout=0)
        except subprocess.TimeoutExpired:
            return None

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            if not select.select([self.server.control], [], [], timeout)[0]:
                raise subprocess.TimeoutExpired("a forked analysis process", timeout)
            self._answer(0)
        return self.returncode

    def kill(self) -> None:
        """Kill the child and everything it started; returns once the server has cleaned up
        (or, if it does not answer, once the server and with it the child are gone)."""
        if self.poll() is None:
            try:
                self.server.control.send(json.dumps({"kill": True}).encode())
            except OSError:
                pass
            self._answer(KILL_TIMEOUT_S)

    def _answer(self, timeout: float) -> None:
        try:
            self.returncode = self.server._receive(timeout)["exit"]
        except (ForkServerError, ValueError, KeyError):
            self.server.close()  # its PID namespace, and every child in it, ends with it
            self.returncode = -signal.SIGKILL


# --- inside the sandbox ---------------------------------------------------------------

def _return_code(status: int) -> int:
    return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)


def _kill_the_rest() -> None:
    """As PID 1: kill every other process in this namespace and reap them all."""
    while True:
        try:
            os.kill(-1, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            while os.waitpid(-1, os.WNOHANG) != (0, 0):
                pass
        except ChildProcessError:
            return
        time.sleep(0.01)


def emptied(folder) -> bool:
    """Remove everything in ``folder`` (folders a child closed are opened first); False if
    anything stays. The server empties /tmp with it, the driver the work folder."""
    for root, dirs, _ in os.walk(folder):
        for name in dirs:
            os.chmod(os.path.join(root, name), 0o700, follow_symlinks=False)
    for name in os.listdir(folder):
        path = os.path.join(folder, name)
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            os.unlink(path)
    return not os.listdir(folder)


def _child(work: str, limits: dict, progress_fd: int, output_fd: int) -> None:
    """A fresh analysis process: its own session and limits, output to its own file."""
    try:
        os.dup2(output_fd, 1)  # first, so that whatever fails below is in the attempt's output
        os.dup2(output_fd, 2)
        os.close(output_fd)
        os.setsid()
        ctypes.CDLL(None).prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)  # as any process: only the server is not
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for number in (signal.SIGTERM, signal.SIGHUP):
            signal.signal(number, signal.SIG_DFL)
        apply_rlimits(limits["cpu_seconds"], limits["memory_bytes"], limits["file_bytes"])
        os.chdir(os.path.join(work, "home"))
        random.seed()  # as a freshly started interpreter would be
        import torch

        os.environ["OMP_NUM_THREADS"] = str(limits["threads"])
        torch.set_num_threads(limits["threads"])
        from .runner import main

        main(work, progress_fd)
    except BaseException:
        traceback.print_exc()
    finally:
        os._exit(1)  # main() leaves through os._exit(0); anything else is a failure


def _wait(control: socket.socket, pid: int) -> int:
    """The child's return code, killing it first if the driver asks."""
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return _return_code(status)
        if select.select([control], [], [], 0.05)[0]:
            data = control.recv(MESSAGE_BYTES)
            if not data or json.loads(data).get("kill"):
                os.kill(-1, signal.SIGKILL)  # the child and all it started: nothing else runs here
                return _return_code(os.waitpid(pid, 0)[1])


def serve(control_fd: int, work: str, preload: list[str]) -> None:
    """Import what analyses need (:data:`PRELOAD` and the modules of their ``analyze``
    functions), then fork one child per ``run`` until the driver hangs up."""
    ctypes.CDLL(None).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    for number in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGPIPE):
        signal.signal(number, signal.SIG_IGN)
    control = socket.socket(fileno=control_fd)
    os.chdir("/")  # the work folder's contents are replaced between children
    for module in (*PRELOAD, *preload):
        __import__(module)
    if len(os.listdir("/proc/self/task")) != 1:  # a thread would not survive fork() sanely
        control.send(json.dumps({"ready": False, "why": "threads after imports"}).encode())
        return
    control.send(json.dumps({"ready": True}).encode())
    while True:
        data, fds, _, _ = socket.recv_fds(control, MESSAGE_BYTES, 2)
        if not data:
            return
        message = json.loads(data)
        if "run" not in message or len(fds) != 2:
            for fd in fds:
                os.close(fd)
            continue
        pid = os.fork()
        if pid == 0:
            control.close()
            _child(work, message["run"], *fds)
        for fd in fds:
            os.close(fd)
        code = _wait(control, pid)
        _kill_the_rest()
        if not emptied("/tmp"):
            return  # the driver sees the server gone and starts a fresh one
        control.send(json.dumps({"exit": code}).encode())


if __name__ == "__main__":
    serve(int(sys.argv[1]), sys.argv[2], sys.argv[3:])
