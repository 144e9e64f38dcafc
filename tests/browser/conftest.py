"""Browser test of the learner's flow: ``./course browser-test`` (not part of ``./course test``).

Playwright drives Debian's chromium (``apt-get install chromium``); ``playwright install``
is never needed. Without /usr/bin/chromium the tests are skipped, with the reason."""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from checkout import checkout_state  # noqa: E402
from course_server import CourseServer  # noqa: E402

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def pytest_configure(config):
    config.addinivalue_line("markers", "browser: drives JupyterLab in chromium (./course browser-test)")


@pytest.fixture(scope="module")
def session_home(tmp_path_factory):
    return tmp_path_factory.mktemp("learner")


@pytest.fixture(scope="module")
def checkout_before():
    return checkout_state()


def require_chromium():
    if not CHROMIUM.exists():
        pytest.skip("Debian's chromium is not installed (sudo apt-get install chromium)")


@pytest.fixture(scope="module")
def course_server(session_home, checkout_before):
    require_chromium()
    server = CourseServer(session_home)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def chromium():
    """Debian's chromium driven by Playwright."""
    require_chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_FLAGS)
        yield browser
        browser.close()


@pytest.fixture(scope="module")
def lab(course_server, chromium):
    from lab_page import LabPage

    link = course_server.printed_link()
    page = chromium.new_page(viewport={"width": 1400, "height": 900})
    page.set_default_timeout(60_000)
    page.goto(link)
    yield LabPage(page, link)
