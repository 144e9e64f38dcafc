"""Real Linux accounts for a class on one machine (tests that run as root).

Each account has its own group, a home folder of mode 700 and a clean environment (its
HOME, this virtualenv's scripts first on PATH, the checkout on PYTHONPATH), as a login on a
shared JupyterHub machine would; commands run as it with no supplementary groups. An
interpreter inside a closed home folder (pyenv under /root) is re-exposed to them the way
the grader's sandbox does it: in the command's own mount namespace, that folder shows only
the interpreter's subtree.
"""
from __future__ import annotations

import os
import pwd
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import pytest

from grader.sandbox.confinement import closed_passage, interpreter_passage, isolate_filesystem

REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Account:
    name: str
    uid: int
    gid: int
    home: Path
    staging: Path  # an empty folder, see isolate_filesystem

    def environment(self) -> dict:
        scripts = str(Path(sys.executable).parent)
        return {"HOME": str(self.home), "USER": self.name, "LOGNAME": self.name, "LANG": "C.UTF-8",
                "PATH": f"{scripts}:/usr/local/bin:/usr/bin:/bin",
                "PYTHONPATH": f"{REPO / 'lib'}:{REPO}",
                "TORCHINDUCTOR_CACHE_DIR": str(self.home / ".cache" / "inductor")}

    def run(self, *command, cwd: Path | None = None, stdin: str | None = None) -> subprocess.CompletedProcess:
        """``command`` as this account (``python`` means this virtualenv's interpreter)."""
        command = [sys.executable if part == "python" else str(part) for part in command]
        return subprocess.run(command, cwd=cwd or self.home, env=self.environment(), preexec_fn=self._become,
                              umask=0o022, input=stdin, capture_output=True, text=True, check=False)

    def _become(self) -> None:
        isolate_filesystem(staging=str(self.staging), network=True)
        os.setgroups([])
        os.setgid(self.gid)
        os.setuid(self.uid)

    def succeed(self, *command, cwd: Path | None = None, stdin: str | None = None) -> str:
        """:meth:`run` that must exit 0; its standard output and error together."""
        done = self.run(*command, cwd=cwd, stdin=stdin)
        assert done.returncode == 0, f"{self.name}: {' '.join(map(str, command))}\n{done.stdout}\n{done.stderr}"
        return done.stdout + done.stderr

    def set_password(self, password: str) -> None:
        """Give this account a password (for a login through PAM, as JupyterHub's)."""
        subprocess.run(["chpasswd"], input=f"{self.name}:{password}\n", text=True, check=True, capture_output=True)

    def write(self, path: Path, text: str) -> None:
        """Write ``text`` to ``path`` as this account (folders made as needed)."""
        self.succeed("python", "-c", "import pathlib, sys; path = pathlib.Path(sys.argv[1]); "
                     "path.parent.mkdir(parents=True, exist_ok=True); path.write_text(sys.stdin.read())",
                     path, stdin=text)


def skip_unless_required(reason: str, requirement: str) -> NoReturn:
    """Skip with ``reason``; fail instead where the environment variable ``requirement`` is 1 (CI)."""
    if os.environ.get(requirement) == "1":
        pytest.fail(f"{requirement}=1 but {reason}")
    pytest.skip(reason)


def require_class_machine(requirement: str) -> None:
    """Skip (or fail under ``requirement``=1) where accounts cannot be made."""
    if os.geteuid() != 0:
        skip_unless_required("creating the class's Linux accounts needs root (CI runs as root)", requirement)
    if shutil.which("useradd") is None:
        skip_unless_required("useradd is not installed", requirement)


@contextmanager
def class_folder(requirement: str):
    """A folder every account can enter (pytest's own temporary folders are closed to them),
    removed afterwards; skipped (or failed under ``requirement``=1) where accounts cannot be made."""
    require_class_machine(requirement)
    closed = unreachable_for_others()
    if closed:
        pytest.fail(f"the class's accounts cannot run this checkout or its virtualenv: {', '.join(closed)} "
                    "is closed to other users; put the checkout and .venv where others can read them (e.g. /opt)")
    root = Path(tempfile.mkdtemp(prefix="grader-class-"))
    root.chmod(0o755)
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def unreachable_for_others() -> list[str]:
    """Folders closed to other users on the way to this virtualenv or checkout (the
    interpreter's own way is re-exposed)."""
    closed = {closed_passage(path) for path in (sys.prefix, str(REPO))} - {None, interpreter_passage()}
    return sorted(passage[0] for passage in closed)


def _create(name: str, root: Path) -> Account:
    home = root / "home" / name
    subprocess.run(["useradd", "--create-home", "--home-dir", str(home), "--user-group",
                    "--shell", "/bin/sh", name], check=True, capture_output=True)
    home.chmod(0o700)
    entry = pwd.getpwnam(name)
    return Account(name, entry.pw_uid, entry.pw_gid, home, root / "staging")


def _end_processes(account: Account) -> None:
    """Kill what still runs as ``account`` (a server that a hub spawned), which would keep
    userdel from removing it."""
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            real_uid = next(line for line in status.read_text().splitlines() if line.startswith("Uid:")).split()[1]
            if int(real_uid) == account.uid:
                os.kill(int(status.parent.name), signal.SIGKILL)
        except (OSError, StopIteration):
            continue  # it ended meanwhile


@contextmanager
def class_accounts(roles: tuple[str, ...], root: Path):
    """{role: Account}, one fresh account per role, homes under ``root``; every account
    (and its home) is removed afterwards, also when the test fails."""
    tag = secrets.token_hex(3)
    for folder in ("home", "staging"):
        (root / folder).mkdir(mode=0o755)
    created = {}
    try:
        for role in roles:
            created[role] = _create(f"gx{tag}{role}"[:32], root)
        yield created
    finally:
        for account in created.values():
            _end_processes(account)
            subprocess.run(["userdel", "--remove", account.name], check=False, capture_output=True)
        shutil.rmtree(root / "home", ignore_errors=True)


def assert_denied(account: Account, code: str, path, error: str = "PermissionError") -> None:
    """Python ``code`` on ``path`` (``sys.argv[1]``) fails with ``error`` as ``account``."""
    done = account.run("python", "-c", "import os, sys; path = sys.argv[1]; " + code, path)
    assert done.returncode != 0, f"{account.name} was allowed: {code} on {path}\n{done.stdout}"
    assert error in done.stderr, done.stderr


def assert_allowed(account: Account, code: str, path) -> str:
    """The positive control of :func:`assert_denied`: the same ``code`` works as ``account``."""
    return account.succeed("python", "-c", "import os, sys; path = sys.argv[1]; " + code, path)

