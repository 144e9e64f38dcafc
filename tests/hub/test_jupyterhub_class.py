"""A class behind a real JupyterHub, driven over HTTP as a browser would.

Real Linux accounts (an instructor, two students) log in through the hub's login form, checked
by JupyterHub's PAMAuthenticator against their passwords; LocalProcessSpawner starts the course's
``jupyterhub-singleuser`` as each student, behind configurable-http-proxy, all on 127.0.0.1. Each
student lands on chapter 00 of their workspace with no instructor tools, fetches chapter 03 and
submits it (student two with a wrong fold) through the Assignments tab's REST API (nbgrader's
assignment_list extension), saving the answers through their server's contents API; the
instructor collects, grades with the isolated grader and returns feedback (commands, as in the
exchange test); each student fetches their feedback with their own score. Student two's login
opens neither student one's server nor their files.

The hub's config is the README's (HUB_CONFIG) plus what a loopback test needs (LOOPBACK_CONFIG),
with one difference: this machine's interpreter lives under /root (mode 700), which the README
avoids by putting the checkout and .venv in /opt, readable by all. So each spawned server first
gets its own mount namespace in which that interpreter is re-exposed, as the exchange test's
commands do (class_accounts), then LocalProcessSpawner drops to the account as usual.

Needs root, jupyterhub (the "hub" extra) and configurable-http-proxy (on PATH, or its path in
CONFIGURABLE_HTTP_PROXY); skipped without them, and fails instead when GRADER_REQUIRE_HUB=1.
About 2.5 minutes on a 2-core machine, half of it grading the two submissions.
"""
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import time
from contextlib import contextmanager
from importlib.util import find_spec
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import requests

from class_accounts import REPO, class_accounts, class_folder, skip_unless_required
from class_exchange import COURSE_ID, WRONG, assert_own_scores, grade_and_return, open_exchange, release_chapter_03
from hub_browser import HubBrowser, address_without_hub_retries, page_config
from notebook_builders import write_filled

REQUIREMENT = "GRADER_REQUIRE_HUB"
START_WITHIN_S = 120  # a server's start (JupyterLab, nbgrader) on a busy 2-core machine

# The README's jupyterhub_config.py; there COURSE is /opt/pytorch-compiler-course and the roster
# the class's account names. jupyter-config/class turns the Assignments tab of learner mode back on.
HUB_CONFIG = '''COURSE = "{course}"
CLASS_MODE = f"{{COURSE}}/jupyter-config/class"
c.JupyterHub.spawner_class = "jupyterhub.spawner.LocalProcessSpawner"
c.Authenticator.allowed_users = {roster}
c.Spawner.cmd = ["sh", "-c", f"{{COURSE}}/.venv/bin/python -m course_workspace {{COURSE}}/notebooks ~/my-work"
                 f' && exec {{COURSE}}/.venv/bin/jupyterhub-singleuser "$@"', "jupyterhub-singleuser"]
c.Spawner.environment = {{"JUPYTER_CONFIG_PATH": f"{{CLASS_MODE}}:{{COURSE}}/jupyter-config/learner",
                         "PATH": f"{{COURSE}}/.venv/bin:/usr/local/bin:/usr/bin:/bin"}}
c.Spawner.default_url = "/lab/tree/my-work/00_guide.ipynb"
'''
# Test machine only: loopback addresses and free ports, and the interpreter re-exposed (see above).
LOOPBACK_CONFIG = '''
from grader.sandbox.confinement import isolate_filesystem
from jupyterhub.spawner import LocalProcessSpawner


class InterpreterExposingSpawner(LocalProcessSpawner):
    def make_preexec_fn(self, name):
        become_user = super().make_preexec_fn(name)

        def preexec():
            isolate_filesystem(staging={staging!r}, network=True)
            become_user()
        return preexec


c.JupyterHub.spawner_class = InterpreterExposingSpawner
c.JupyterHub.ip = "127.0.0.1"
c.JupyterHub.port = {port}
c.JupyterHub.hub_ip = "127.0.0.1"
c.JupyterHub.hub_port = {hub_port}
c.ConfigurableHTTPProxy.api_url = "http://127.0.0.1:{proxy_api_port}"
'''
INSTRUCTOR_PLUGINS = ("@jupyter/nbgrader:formgrader", "@jupyter/nbgrader:course-list",
                      "@jupyter/nbgrader:create-assignment")


def hub_config(course: str, roster) -> str:
    return HUB_CONFIG.format(course=course, roster="{" + ", ".join(f'"{name}"' for name in sorted(roster)) + "}")


def code_lines(python: str) -> list[str]:
    """``python``'s lines without comments, indentation of the whole and blank lines (the
    README comments its config; the config has no '#' of its own)."""
    lines = (re.sub(r"\s*#.*", "", line) for line in textwrap.dedent(python).splitlines())
    return [line for line in lines if line.strip()]


def test_the_readme_gives_the_hub_config_this_test_runs():
    """Both languages' jupyterhub_config.py in the README is HUB_CONFIG, for /opt and an example roster."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    blocks = [block.split("```")[0] for block in readme.split("```python\n")[1:] if "c.JupyterHub.spawner_class" in block]
    assert len(blocks) == 2, "a jupyterhub_config.py block in each language"
    want = code_lines(hub_config("/opt/pytorch-compiler-course", {"teacher", "student1", "student2"}))
    for block in blocks:
        assert code_lines(block) == want


@pytest.fixture
def proxy() -> str:
    """configurable-http-proxy's executable (with jupyterhub importable)."""
    if find_spec("jupyterhub") is None:
        skip_unless_required("jupyterhub is not installed (pip install -e '.[hub]')", REQUIREMENT)
    found = os.environ.get("CONFIGURABLE_HTTP_PROXY") or shutil.which("configurable-http-proxy")
    if not found or not os.access(found, os.X_OK):
        skip_unless_required("configurable-http-proxy is not installed (npm install configurable-http-proxy@5; "
                             "its path in CONFIGURABLE_HTTP_PROXY)", REQUIREMENT)
    return found


@pytest.fixture
def class_root(proxy):
    with class_folder(REQUIREMENT) as root:
        yield root


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextmanager
def running_hub(root: Path, proxy: str, roster: set):
    """The hub (which starts the proxy) in its own folder and process group, on 127.0.0.1;
    yields its address. Afterwards the hub stops its servers and proxy, and whatever is left
    of its process group is killed (the accounts' own processes: class_accounts)."""
    folder = root / "hub"  # the hub's database, cookie secret and proxy pid file, as in its default cwd
    folder.mkdir(mode=0o700)
    port = free_port()
    config = hub_config(str(REPO), roster)
    config += LOOPBACK_CONFIG.format(staging=str(root / "staging"), port=port, hub_port=free_port(),
                                     proxy_api_port=free_port())
    (folder / "jupyterhub_config.py").write_text(config, encoding="utf-8")
    log_path = folder / "jupyterhub.log"
    environment = {"PATH": f"{Path(proxy).parent}:/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}
    with open(log_path, "w") as log:
        hub = subprocess.Popen([sys.executable, "-m", "jupyterhub", "-f", "jupyterhub_config.py"], cwd=folder,
                               env=environment, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_answering(url + "/hub/api/", hub, within_s=60)
        yield url
    except BaseException:
        print(f"---- {log_path} (last 100 lines) ----\n" + "\n".join(log_path.read_text().splitlines()[-100:]))
        raise
    finally:
        hub.terminate()
        try:
            hub.wait(timeout=60)
        except subprocess.TimeoutExpired:
            pass
        try:
            os.killpg(hub.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        hub.wait(timeout=10)


def wait_until_answering(url: str, process: subprocess.Popen, within_s: float) -> None:
    """Until ``url`` answers 200, while ``process`` (which serves it) runs."""
    deadline = time.monotonic() + within_s
    while True:
        assert process.poll() is None, f"the hub exited with {process.returncode}"
        try:
            if requests.get(url, timeout=5).ok:
                return
        except requests.ConnectionError:
            pass
        assert time.monotonic() < deadline, f"{url} did not answer within {within_s} s"
        time.sleep(0.5)


def assignments(browser: HubBrowser, name: str, action: str | None = None) -> list[dict]:
    """The Assignments tab's list for the course, after ``action`` on chapter 03 (fetch,
    submit, fetch_feedback) when given, as nbgrader's assignment_list extension answers it."""
    if action is None:
        answer = browser.open(f"/user/{name}/assignments", course_id=COURSE_ID)
    else:
        answer = browser.send("POST", f"/user/{name}/assignments/{action}",
                              {"course_id": COURSE_ID, "assignment_id": "ch03"})
    answer.raise_for_status()
    listing = answer.json()
    assert listing["success"], listing["value"]
    return listing["value"]


def fetch_answer_submit(browser: HubBrowser, name: str, answers: dict, scratch: Path) -> None:
    """Fetch chapter 03, save it answered (``answers``: see write_filled) through the
    student's own contents API, as JupyterLab saves a notebook, and submit it."""
    assert [(a["assignment_id"], a["status"]) for a in assignments(browser, name)] == [("ch03", "released")]
    fetched = [a["path"] for a in assignments(browser, name, "fetch") if a["status"] == "fetched"]
    assert fetched == ["ch03"]
    notebook_url = f"/user/{name}/api/contents/ch03/03_fx.ipynb"
    released = browser.open(notebook_url, content=1)
    released.raise_for_status()
    (scratch / f"{name}-released.ipynb").write_text(json.dumps(released.json()["content"]), encoding="utf-8")
    answered = write_filled(scratch / f"{name}.ipynb", notebook_path=scratch / f"{name}-released.ipynb",
                            overrides=answers)
    saved = browser.send("PUT", notebook_url, {"type": "notebook", "format": "json",
                                               "content": json.loads(answered.read_text(encoding="utf-8"))})
    assert saved.status_code == 200, saved.text
    assert any(a["status"] == "submitted" for a in assignments(browser, name, "submit"))


def fetch_own_feedback(browser: HubBrowser, name: str) -> tuple[str, str]:
    """(its contents API path, the feedback page) after the Assignments tab's fetch_feedback."""
    submitted = next(a for a in assignments(browser, name, "fetch_feedback") if a["status"] == "submitted")
    [notebook] = submitted["submissions"][-1]["notebooks"]
    path = f"/user/{name}/api/contents/{notebook['local_feedback_path']}"
    feedback = browser.open(path, content=1, format="text")
    feedback.raise_for_status()
    return path, feedback.json()["content"]


def test_students_work_through_the_hub_and_cannot_open_each_others_server(class_root, proxy, tmp_path):
    with class_accounts(("teach", "one", "two"), class_root) as accounts:
        teacher, one, two = accounts["teach"], accounts["one"], accounts["two"]
        passwords = {account.name: secrets.token_urlsafe(12) for account in accounts.values()}
        for account in accounts.values():
            account.set_password(passwords[account.name])
        open_exchange(class_root, accounts.values())
        course = release_chapter_03(teacher)

        with running_hub(class_root, proxy, set(passwords)) as hub_url:
            # PAM checks the password: a wrong one is refused, the instructor's own let in.
            instructor = HubBrowser(hub_url)
            refused = instructor.log_in(teacher.name, "not-" + passwords[teacher.name])
            assert refused.status_code == 403 and "Invalid username or password" in refused.text, refused.url
            home = instructor.log_in(teacher.name, passwords[teacher.name], then="/hub/home")
            assert home.status_code == 200 and home.url == hub_url + "/hub/home", home.url

            # Each student's login starts their server, which opens chapter 00 of their workspace
            # in learner mode, with the Assignments tab and without the instructor's tools.
            students = {one.name: HubBrowser(hub_url), two.name: HubBrowser(hub_url)}
            for name, browser in students.items():
                browser.log_in(name, passwords[name]).raise_for_status()
            for name, browser in students.items():
                landing = browser.wait_for_own_server(name, within_s=START_WITHIN_S)
                assert address_without_hub_retries(landing.url) == f"{hub_url}/user/{name}/lab/tree/my-work/00_guide.ipynb"
                lab = page_config(landing.text)
                assert (lab["hubUser"], lab["treePath"]) == (name, "my-work/00_guide.ipynb")
                disabled = set(lab["disabledExtensions"])
                assert set(INSTRUCTOR_PLUGINS) <= disabled and "@jupyter/nbgrader:assignment-list" not in disabled
                for instructor_route in ("/formgrader/api/status", "/formgraders"):
                    assert browser.open(f"/user/{name}{instructor_route}").status_code == 404
                guide = browser.open(f"/user/{name}/api/contents/my-work/00_guide.ipynb", content=0)
                assert guide.status_code == 200 and guide.json()["type"] == "notebook"

            # Through the Assignments tab's API: fetch, answer, submit; the instructor grades
            # (commands); each student fetches their own feedback with their own score.
            fetch_answer_submit(students[one.name], one.name, {}, tmp_path)
            fetch_answer_submit(students[two.name], two.name, WRONG, tmp_path)
            grade_and_return(teacher, course)
            one_feedback_path, one_feedback = fetch_own_feedback(students[one.name], one.name)
            assert_own_scores(one_feedback, fetch_own_feedback(students[two.name], two.name)[1])

            # Student two's login opens neither student one's server (the hub refuses student two
            # the server's OAuth login) nor their files (the server refuses a request without its
            # own cookie); the same requests with student one's login are the control.
            one_lab = f"/user/{one.name}/lab"
            assert students[one.name].open(one_lab).status_code == 200
            denied = students[two.name].open(one_lab)
            assert (denied.status_code, urlsplit(denied.url).path) == (403, "/hub/api/oauth2/authorize"), denied.url
            assert "You do not have permission to access" in denied.text
            assert students[one.name].open(one_feedback_path).status_code == 200
            denied = students[two.name].open(one_feedback_path)
            assert (denied.status_code, denied.history) == (403, []), denied.url
