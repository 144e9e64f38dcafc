"""What the sandbox may see of the file system: an allowlist, built by bubblewrap.

Learner code runs in a mount namespace where only these exist, read-only: the system's
programs and libraries (``/usr`` and friends, for the C++ compiler Inductor calls), the
Python installation, the virtualenv's site-packages *without* the course's ``solutions``,
and the course packages a notebook imports -- plus, writable, the attempt's own work
folder and an empty ``/tmp``. Home folders, ``/work``, ``/srv``, any other copy of the
course, the instructor's course directory and the grader's ``/proc`` entries do not
exist in there, whatever their permissions are.

bubblewrap (``bwrap``; Debian package ``bubblewrap``, the engine of Flatpak) builds the
view without root, through user namespaces, and also gives the sandbox no network, its
own PID namespace and no capabilities. Where it is missing (or the machine forbids user
namespaces) the driver falls back to :mod:`.confinement` alone and says so in every
report.
"""
from __future__ import annotations

import functools
import importlib.util
import os
import shutil
import site
import subprocess
import sys
from pathlib import Path

INSTALL_HINT = "sudo apt-get install bubblewrap"

WORK = "/sandbox"                    # the attempt's work folder, inside
PACKAGES = "/course/packages"        # the course packages, inside (PYTHONPATH)
VENV = "/course/venv"                # the virtualenv, inside, if the grader runs in one
SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
          # the C++ compiler is /usr/bin/c++ -> /etc/alternatives/c++; the loader's cache
          "/etc/alternatives", "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime")
SANDBOX_UID = 65534                  # "nobody" inside; the invoking user outside
# The course's own packages a notebook may import (grader: check() and the sandbox runner;
# cxx_toolchain: every import torch runs it, see its docstring).
COURSE_PACKAGES = ("grader", "toychip", "graphviews", "benchmarking", "course_models", "cxx_toolchain")


# No network, IPC, UTS or cgroup sharing, its own PID namespace with no bwrap helper inside
# (whose memory, holding the host paths, could be ptraced), "nobody" with no capabilities,
# killed with its parent, no terminal to inject into, no user namespaces of its own.
NAMESPACE_FLAGS = ("--unshare-all", "--unshare-user", "--disable-userns",
                   "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID), "--hostname", "sandbox",
                   "--die-with-parent", "--new-session", "--as-pid-1", "--cap-drop", "ALL")


@functools.cache
def bwrap() -> str | None:
    """The ``bwrap`` program, if it is installed and can build this sandbox on this machine
    (user namespaces allowed, a bubblewrap new enough for every flag)."""
    path = shutil.which("bwrap")
    if path is None:
        return None
    try:
        probe = subprocess.run([path, *NAMESPACE_FLAGS, "--ro-bind", "/", "/", "true"],
                               capture_output=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return path if probe.returncode == 0 else None


def course_packages() -> dict[str, str]:
    """Package name -> the folder this process imports it from (the sandbox runs the same code)."""
    return {name: str(Path(importlib.util.find_spec(name).origin).parent) for name in COURSE_PACKAGES}


def _inside(path: str) -> str:
    """Where a path of the Python installation or virtualenv appears inside the sandbox."""
    if sys.prefix != sys.base_prefix and (path == sys.prefix or path.startswith(sys.prefix + os.sep)):
        return VENV + path[len(sys.prefix):]
    return path


def python() -> str:
    """The interpreter, as the sandbox names it (its virtualenv, if the grader has one)."""
    return _inside(sys.executable)


def _system_binds() -> list[str]:
    args = []
    for path in SYSTEM:
        if os.path.islink(path):          # merged /usr: /bin -> usr/bin
            args += ["--symlink", os.readlink(path), path]
        elif os.path.exists(path):
            args += ["--ro-bind", path, path]
    return args


def _python_binds() -> list[str]:
    """The interpreter's installation and virtualenv, with the course's ``solutions`` masked
    wherever a non-editable install put it."""
    base = os.path.realpath(sys.base_prefix)
    args = [] if base == "/usr" or base.startswith("/usr/") else ["--ro-bind", base, base]
    if sys.prefix != sys.base_prefix:
        args += ["--ro-bind", sys.prefix, VENV]
    for folder in site.getsitepackages():
        solutions = os.path.join(folder, "solutions")
        if os.path.isdir(solutions):
            args += ["--tmpfs", _inside(solutions), "--remount-ro", _inside(solutions)]
    return args


def command(work: Path, argv: list[str]) -> list[str]:
    """``bwrap`` running ``python argv`` in the allowlisted view, ``work`` mounted at ``/sandbox``."""
    args = [bwrap(), *NAMESPACE_FLAGS, "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
    args += _system_binds() + _python_binds()
    for name, folder in course_packages().items():
        args += ["--ro-bind", folder, f"{PACKAGES}/{name}"]
    args += ["--bind", str(work), WORK, "--chdir", f"{WORK}/home"]
    return args + ["--", python(), *argv]
