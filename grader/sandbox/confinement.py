"""OS-level limits for the sandbox process, applied between fork and exec.

Always: its own session (so the whole process group can be killed), resource limits on
CPU time, address space, file size and open files. When running as root on Linux, also:
no network (a fresh network namespace), the protected folders (reference solutions,
course secrets) hidden under empty read-only tmpfs mounts, and a throw-away uid so the
process limit applies and no other sandbox's files are readable.
"""
from __future__ import annotations

import ctypes
import os
import resource
import sys
from dataclasses import dataclass, field

CLONE_NEWNS, CLONE_NEWNET = 0x00020000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_BIND, MS_REC, MS_PRIVATE = 1, 2, 4, 4096, 16384, 1 << 18


@dataclass(frozen=True)
class Limits:
    """Budgets for one sandbox process (seconds and bytes), and what it starts with."""

    cell_timeout_s: float = 120.0
    task_timeout_s: float = 60.0
    cpu_seconds: int = 900
    memory_bytes: int = 6 * 2**30
    file_bytes: int = 512 * 2**20
    max_processes: int = 64
    protected_paths: tuple[str, ...] = field(default_factory=tuple)
    # Intra-op threads of torch in the sandbox (None: torch's default, every core). A batch
    # grading N submissions at once gives each its share, so they do not fight over cores.
    threads: int | None = None
    # An Inductor cache that `release` filled from the reference notebook: every attempt
    # starts from its own copy of it, so kernels the references compiled are not compiled
    # again, and nothing one submission writes reaches another (see grader.sandbox.driver).
    inductor_cache: str = ""
    # Only for that reference run: merge what the attempts compiled back into inductor_cache.
    collect_cache: bool = False


def strong_isolation_available() -> bool:
    """Namespaces, hidden folders and a separate uid need root on Linux."""
    return sys.platform.startswith("linux") and os.geteuid() == 0


def _libc():
    return ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"{what}: {os.strerror(error)}")


def closed_passage(path: str) -> tuple[str, str] | None:
    """(first folder on the way to ``path`` that other users cannot enter, its child on
    that way), e.g. ("/root", "/root/.pyenv"); None when every folder is open."""
    parts = os.path.realpath(path).split(os.sep)
    for depth in range(2, len(parts)):
        folder = os.sep.join(parts[:depth])
        if not os.stat(folder).st_mode & 0o001:
            return folder, os.sep.join(parts[:depth + 1])
    return None


def interpreter_passage() -> tuple[str, str] | None:
    """The :func:`closed_passage` on the way to Python, if any.

    A home folder of mode 700 holding the interpreter would stop the throw-away uid from
    starting Python; inside the sandbox's mount namespace that folder is replaced by an
    empty one through which only the interpreter's subtree is visible.
    """
    for real in {os.path.realpath(sys.executable), os.path.realpath(sys.base_prefix)}:
        passage = closed_passage(real)
        if passage is not None:
            return passage
    return None


def _mount(libc, source: str, target: str, fstype, flags: int, data=None) -> None:
    _check(libc.mount(source.encode(), target.encode(), fstype, flags, data), f"mount {target}")


def isolate_filesystem(hidden: tuple[str, ...] = (), staging: str | None = None, *, network: bool = False) -> None:
    """Root only: give this process its own mount namespace (and, unless ``network``, no
    network). ``hidden`` folders become empty and read-only; a closed folder on the way to
    Python (:func:`interpreter_passage`) shows only the interpreter's subtree, re-exposed
    through ``staging``, an empty folder."""
    libc = _libc()
    _check(libc.unshare(CLONE_NEWNS | (0 if network else CLONE_NEWNET)), "unshare")
    _mount(libc, "none", "/", None, MS_REC | MS_PRIVATE)
    for path in hidden:
        if os.path.isdir(path):
            _mount(libc, "tmpfs", path, b"tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV, b"size=4k")
    passage = interpreter_passage()
    if passage is not None and staging is not None:
        closed, child = passage
        _mount(libc, child, staging, None, MS_BIND | MS_REC)
        _mount(libc, "tmpfs", closed, b"tmpfs", MS_NOSUID | MS_NODEV, b"size=64k,mode=711")
        os.mkdir(child)
        _mount(libc, staging, child, None, MS_BIND | MS_REC)


def apply_rlimits(cpu_seconds: int, memory_bytes: int, file_bytes: int, *, final: bool = True) -> None:
    """CPU time, address space and file size of this process; no core dumps. ``final``
    also lowers the hard limits, so that the process cannot raise them again; the fork
    server keeps its hard limits, since each of its children sets its own, maybe higher."""
    for which, value in ((resource.RLIMIT_CPU, cpu_seconds), (resource.RLIMIT_AS, memory_bytes),
                         (resource.RLIMIT_FSIZE, file_bytes), (resource.RLIMIT_CORE, 0)):
        hard = value if final else resource.getrlimit(which)[1]
        resource.setrlimit(which, (value, hard))


def confine(limits: Limits, uid: int | None, staging: str | None = None, *, final: bool = True):
    """A ``preexec_fn`` that applies ``limits`` (and, as root, namespaces and ``uid``;
    ``staging`` is an empty folder used to re-expose the interpreter; ``final``: see
    :func:`apply_rlimits`)."""
    def apply() -> None:
        os.setsid()
        apply_rlimits(limits.cpu_seconds, limits.memory_bytes, limits.file_bytes, final=final)
        if uid is not None:
            isolate_filesystem(limits.protected_paths, staging)
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            # Counts the throw-away uid's threads and processes only (never set for a
            # shared uid: a desktop user's own processes would count against it).
            resource.setrlimit(resource.RLIMIT_NPROC, (limits.max_processes, limits.max_processes))
    return apply
