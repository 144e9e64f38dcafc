"""``./course`` started the way CI or a remote machine starts it: no browser, a free port."""
from __future__ import annotations

import os
import re
import socket
import subprocess
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LINK = re.compile(r"http://127\.0\.0\.1:\d+/\S+")


class CourseServer:
    """Runs ``./course open`` in CI mode with the learner's workspace and JupyterLab's state in
    ``home``, so the test neither touches a real ``my-work/`` nor depends on earlier sessions."""

    def __init__(self, home: Path):
        self.workspace = home / "my-work"
        self.log = home / "course.log"
        env = dict(os.environ, CI="true", COURSE_WORKSPACE=str(self.workspace),
                   JUPYTERLAB_WORKSPACES_DIR=str(home / "lab-workspaces"),
                   JUPYTERLAB_SETTINGS_DIR=str(home / "lab-settings"))
        with self.log.open("w") as log:
            self.process = subprocess.Popen([str(REPO / "course"), "open", f"--port={_free_port()}"],
                                            cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)

    def printed_link(self, timeout_s: float = 600) -> str:
        """The link ``./course`` prints for the learner (the first run may install packages)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            match = LINK.search(self.log.read_text(errors="replace"))
            if match:
                return match.group(0)
            if self.process.poll() is not None:
                raise RuntimeError(f"./course exited with {self.process.returncode}:\n{self.output()}")
            time.sleep(0.5)
        raise TimeoutError(f"./course printed no link in {timeout_s} s:\n{self.output()}")

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def stop(self) -> None:
        """SIGTERM lets Jupyter shut its kernels down; kill only if it hangs."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
