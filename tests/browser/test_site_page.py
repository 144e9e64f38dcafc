"""A chapter page of the executed edition in chromium: title, an SVG graph and the search box are visible.

Needs the built site (``./course site``); it fails, naming the command, when the site is missing."""
import pytest

from course_site.build import DEFAULT_OUTPUT

pytestmark = pytest.mark.browser
CHAPTER = DEFAULT_OUTPUT / "chapters" / "03_fx.html"


@pytest.fixture(scope="module")
def chapter_page(chromium):
    if not CHAPTER.is_file():
        pytest.fail(f"{CHAPTER} is missing: run ./course site first")
    page = chromium.new_page(viewport={"width": 1280, "height": 900})
    page.goto(CHAPTER.as_uri())
    yield page
    page.close()


def test_chapter_page_shows_its_title_an_svg_graph_and_the_search_box(chapter_page, tmp_path):
    heading = chapter_page.locator("article h1")
    assert heading.is_visible() and "第 03 章" in heading.inner_text()
    graph = chapter_page.locator("img[src$='.svg']").first
    graph.scroll_into_view_if_needed()
    assert graph.is_visible() and graph.evaluate("image => image.complete && image.naturalWidth > 0")
    chapter_page.screenshot(path=tmp_path / "chapter-03.png")
    print(f"screenshot: {tmp_path / 'chapter-03.png'}")
    chapter_page.keyboard.press("Control+K")  # the theme's search dialog
    search = chapter_page.locator("input[name='q']:visible").first
    assert search.is_visible()
