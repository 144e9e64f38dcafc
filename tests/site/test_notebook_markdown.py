"""The chapters' prose renders as written under CommonMark, the rules both the site (myst)
and JupyterLab follow: no emphasis marker is left showing as literal ``**``. (CommonMark does
not close ``**术语（term）**后文``: a closing ``**`` after punctuation must be followed by a
space or punctuation, so the parenthesised term goes after the bold one: ``**术语**（term）后文``.)"""
import re

import pytest

from course_site.build import chapter_notebooks
from grader.grading.notebooks import read_notebook

pytestmark = pytest.mark.site
CODE = re.compile(r"<code>.*?</code>", re.S)


def literal_markers(markdown: str) -> list[str]:
    """Lines whose rendered text (code spans aside) still shows ``**``."""
    from markdown_it import MarkdownIt  # the `site` extra's parser (myst-parser's)

    renderer = MarkdownIt("commonmark")
    return [line for line in markdown.splitlines() if "**" in CODE.sub("", renderer.render(line))]


def test_the_check_finds_an_unclosed_bold_term():
    assert literal_markers("**调度表（dispatch table）**和") and not literal_markers("**调度表**（dispatch table）和")


@pytest.mark.parametrize("notebook", chapter_notebooks(), ids=lambda path: path.name)
def test_no_bold_marker_shows_literally(notebook):
    cells = [cell for cell in read_notebook(notebook).cells if cell.cell_type == "markdown"]
    assert [line for cell in cells for line in literal_markers(cell.source)] == []
