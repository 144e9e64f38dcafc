"""A graph on the site is an SVG image file, though its output also has text/html (JupyterLab's
scroll box): site/conf.py ranks image/svg+xml first for myst-nb's HTML builders. Needs the
site extra (myst-nb), not a built site."""
import runpy

import pytest

from course_site.build import ROOT
from graphviews import GraphView, render

pytestmark = pytest.mark.site


@pytest.mark.parametrize("builder", ["html", "dirhtml", "singlehtml"])
def test_html_pages_take_a_graphs_svg_not_its_scroll_box(builder):
    from myst_nb.core.render import get_mime_priority  # the site extra; the course's own run collects this file too
    view = GraphView()
    view.add_node("x", "x", "placeholder")
    bundle = render(view)._repr_mimebundle_()
    overrides = runpy.run_path(str(ROOT / "site" / "conf.py"))["nb_mime_priority_overrides"]
    assert {"text/html", "image/svg+xml"} <= set(bundle)
    assert next(mime for mime in get_mime_priority(builder, overrides) if mime in bundle) == "image/svg+xml"
