"""The one line ``./course`` ends with: the link to chapter 00 of the server it started."""
import subprocess
import sys

from course_workspace.server_link import chapter_link, wait_for_server


def test_the_link_opens_chapter_00_with_the_token():
    server = {"url": "http://localhost:8888/", "token": "abc"}
    assert chapter_link(server) == "http://127.0.0.1:8888/lab/tree/00_guide.ipynb?token=abc"


def test_a_base_url_and_no_token_are_kept():
    server = {"url": "http://10.0.0.5:9000/user/ann/", "token": ""}
    assert chapter_link(server) == "http://10.0.0.5:9000/user/ann/lab/tree/00_guide.ipynb"


def test_a_server_process_that_ends_gives_no_link():
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    assert wait_for_server(process.pid, timeout_s=5) is None
