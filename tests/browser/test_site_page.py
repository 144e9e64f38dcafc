"""The executed edition in chromium, served over HTTP like a static host: a chapter page shows its
title, an SVG graph and the search box, and the search page finds a Chinese word.

Needs the built site (``./course site``); it fails, naming the command, when the site is missing."""
import functools
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

import pytest

from course_site.build import DEFAULT_OUTPUT
from failure_screenshots import open_page

pytestmark = pytest.mark.browser


class QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, *args):  # the requests are not the test's output
        pass


@pytest.fixture(scope="module")
def site_url():
    if not (DEFAULT_OUTPUT / "index.html").is_file():
        pytest.fail(f"{DEFAULT_OUTPUT}/index.html is missing: run ./course site first")
    handler = functools.partial(QuietHandler, directory=str(DEFAULT_OUTPUT))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


@pytest.fixture
def page(chromium):
    with open_page(chromium, viewport={"width": 1280, "height": 900}) as page:
        page.set_default_timeout(30_000)
        yield page


def test_chapter_page_shows_its_title_an_svg_graph_and_the_search_box(page, site_url, tmp_path):
    page.goto(f"{site_url}/chapters/03_fx.html")
    heading = page.locator("article h1")
    assert heading.is_visible() and "第 03 章" in heading.inner_text()
    graph = page.locator("img[src$='.svg']").first
    graph.scroll_into_view_if_needed()
    assert graph.is_visible() and graph.evaluate("image => image.complete && image.naturalWidth > 0")
    page.screenshot(path=tmp_path / "chapter-03.png")
    print(f"screenshot: {tmp_path / 'chapter-03.png'}")
    page.keyboard.press("Control+K")  # the theme's search dialog
    assert page.locator("input[name='q']:visible").first.is_visible()


def test_search_finds_the_chapters_that_mention_a_chinese_word(page, site_url):
    errors = []
    page.on("pageerror", lambda error: errors.append(error))
    page.goto(f"{site_url}/search.html?q=芯片")
    results = page.locator("#search-results li")
    results.first.wait_for()
    assert "第 08 章" in page.locator("#search-results").inner_text()
    assert errors == []
