"""The built executed edition (``./course site``): every chapter, an index, search, SVG graphs,
the recorded GPU results, no solution code, no errors, and every link inside it resolves."""
import inspect
import json
import re
from functools import cache

import pytest

from course_site.build import ROOT, chapter_notebooks
from grader import chapters
from grader.grading.notebooks import read_notebook
from site_html import Page, broken_links, remote_assets

pytestmark = pytest.mark.site
CHAPTER_NOTEBOOKS = chapter_notebooks()


@cache
def pages(site) -> dict[str, Page]:
    """The site's pages (the theme's template fragments in _static are not pages)."""
    return {str(path.relative_to(site)): Page(path) for path in sorted(site.rglob("*.html"))
            if "_static" not in path.relative_to(site).parts}


def chapter_title(notebook) -> str:
    first_markdown = next(cell for cell in read_notebook(notebook).cells if cell.cell_type == "markdown")
    return first_markdown.source.splitlines()[0].lstrip("# ").strip()


def solution_lines() -> set[str]:
    """Lines of the reference solutions' bodies that neither a stored notebook nor the course library
    (whose demo models some cells print) contains."""
    stored = "\n".join(cell.source for path in CHAPTER_NOTEBOOKS for cell in read_notebook(path).cells)
    stored += "\n".join(path.read_text(encoding="utf-8") for path in (ROOT / "lib").rglob("*.py"))
    lines = set()
    for exercise in chapters.every_exercise():
        body = inspect.getsource(exercise.reference_function).splitlines()[1:]
        lines |= {line.strip() for line in body if len(line.strip()) >= 30 and line.strip() not in stored}
    return lines


def test_every_chapter_has_a_page_and_the_index_lists_it_by_title(built_site):
    index = pages(built_site)["index.html"]
    for notebook in CHAPTER_NOTEBOOKS:
        page = pages(built_site).get(f"chapters/{notebook.stem}.html")
        assert page is not None, f"no page for {notebook.name}"
        assert chapter_title(notebook) in page.text and chapter_title(notebook) in index.text
    assert "An executed edition" in index.text


def test_search_works_offline_with_chinese_words(built_site):
    assert "search.html" in pages(built_site)
    script = (built_site / "searchindex.js").read_text(encoding="utf-8")
    terms = json.loads(script[script.index("(") + 1:script.rindex(")")])["terms"]
    assert {"调度", "芯片", "dynamo"} <= set(terms)  # jieba split the Chinese text into words
    assert "调度器是" not in terms


def test_graphs_are_svg_images_on_the_chapter_pages(built_site):
    svg_images = [url for name, page in pages(built_site).items() if name.startswith("chapters/")
                  for tag, _, url in page.links if tag == "img" and url.endswith(".svg")]
    assert len(svg_images) >= 9
    assert (built_site / "chapters" / svg_images[0]).read_text(encoding="utf-8").lstrip().startswith(("<svg", "<?xml"))


def test_gpu_cells_show_the_recorded_results_with_their_hardware(built_site):
    hardware = json.loads((ROOT / "assets" / "gpu" / "ch01_gpu_timings.json").read_text())["hardware"]
    assert hardware in pages(built_site)["chapters/01_compile.html"].text


def test_no_reference_solution_code_is_on_any_page(built_site):
    lines = solution_lines()
    assert len(lines) >= 40
    site_text = "\n".join(page.text for page in pages(built_site).values())
    assert [line for line in lines if line in site_text] == []
    assert "def count_ops(gm: fx.GraphModule) -> dict:" in site_text  # the blank stub is there, read the same way


def test_exercise_cells_are_shown_without_their_outputs(built_site):
    chapter = pages(built_site)["chapters/03_fx.html"]
    assert 'check("03.op_census")' in chapter.text
    assert [name for name, page in pages(built_site).items() if "还没有作答" in page.text] == []


def test_no_cell_shows_an_error(built_site):
    for name, page in pages(built_site).items():
        assert "traceback" not in page.classes, f"{name} shows an error output"
        assert not re.search(r"Traceback \(most recent call last\)", page.text), name


def test_every_internal_link_and_asset_resolves(built_site):
    assert [broken for page in pages(built_site).values() for broken in broken_links(page, built_site)] == []


def test_pages_load_nothing_from_other_sites(built_site):
    assert {name: remote_assets(page) for name, page in pages(built_site).items() if remote_assets(page)} == {}
