"""``python -m course_workspace.server_link PID``: the link to chapter 00 of the Jupyter
server with process id PID, once it is up; exit status 1 if it stops or never comes up.

``./course`` runs JupyterLab with its log in a file and ends with this one line, so the
link is not buried under pip's and JupyterLab's output.
"""
from __future__ import annotations

import os
import sys
import time

CHAPTER_00 = "lab/tree/00_guide.ipynb"


def chapter_link(server: dict) -> str:
    """``http://127.0.0.1:8888/lab/tree/00_guide.ipynb?token=…`` for a running server's info."""
    url = server["url"].replace("://localhost:", "://127.0.0.1:")
    token = f"?token={server['token']}" if server.get("token") else ""
    return f"{url.rstrip('/')}/{CHAPTER_00}{token}"


def wait_for_server(pid: int, timeout_s: float = 300) -> dict | None:
    """The running-server info Jupyter writes for ``pid``; None if the process ends first."""
    from jupyter_server.serverapp import list_running_servers

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for server in list_running_servers():
            if server.get("pid") == pid:
                return server
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        time.sleep(0.3)
    return None


def main(argv=None) -> int:
    (pid,) = argv if argv is not None else sys.argv[1:]
    server = wait_for_server(int(pid))
    if server is None:
        return 1
    print(chapter_link(server))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
