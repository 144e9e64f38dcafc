"""Browser test of the learner's flow: ``./course browser-test`` (not part of ``./course test``).

Playwright drives Debian's chromium (``apt-get install chromium``); ``playwright install``
is never needed. Without /usr/bin/chromium the tests are skipped, with the reason."""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

import failure_screenshots  # noqa: E402
from checkout import checkout_state  # noqa: E402
from course_server import CourseServer  # noqa: E402

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def pytest_configure(config):
    config.addinivalue_line("markers", "browser: drives JupyterLab in chromium (./course browser-test)")


SCREENSHOT_FOLDER = pytest.StashKey[Path]()


@pytest.fixture(scope="session", autouse=True)
def screenshot_folder(tmp_path_factory, request):
    request.config.stash[SCREENSHOT_FOLDER] = tmp_path_factory.getbasetemp() / "failure-screenshots"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A failing test leaves a screenshot of each open page (pytest's temporary folder)."""
    report = (yield).get_result()
    if report.failed and SCREENSHOT_FOLDER in item.config.stash:
        for problem in failure_screenshots.take(item.config.stash[SCREENSHOT_FOLDER], f"{item.name}-{report.when}"):
            report.sections.append(("failure screenshot", problem))


def pytest_terminal_summary(terminalreporter):
    if failure_screenshots.taken:
        terminalreporter.section("screenshots of the failures")
        for path in failure_screenshots.taken:
            terminalreporter.line(f"screenshot: {path}")


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
    with failure_screenshots.open_page(chromium, viewport={"width": 1400, "height": 900}) as page:
        page.set_default_timeout(60_000)
        page.goto(link)
        yield LabPage(page, link)
