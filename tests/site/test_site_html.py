"""The site checker itself: it sees broken links and remote assets, and not the links that are fine."""
from site_html import Page, broken_links, remote_assets


def test_broken_internal_links_and_remote_assets_are_found_and_good_ones_pass(tmp_path):
    (tmp_path / "chapters").mkdir()
    (tmp_path / "_static").mkdir()
    (tmp_path / "_static" / "app.js").write_text("")
    (tmp_path / "index.html").write_text("<p>home</p>")
    page_path = tmp_path / "chapters" / "03_fx.html"
    page_path.write_text(
        '<a href="../index.html#top">home</a><a href="#here">here</a><a href="https://pytorch.org">docs</a>'
        '<script src="../_static/app.js?v=1"></script><img src="../_images/missing.svg">'
        '<script src="https://cdn.example.org/require.js"></script><a href="../%E7%AB%A0.html">章</a>'
        '<p>第 03 章</p><script>var hidden = 1;</script>')
    page = Page(page_path)
    assert broken_links(page, tmp_path) == ["chapters/03_fx.html -> ../_images/missing.svg",
                                            "chapters/03_fx.html -> ../%E7%AB%A0.html"]
    assert remote_assets(page) == ["https://cdn.example.org/require.js"]
    assert "第 03 章" in page.text and "hidden" not in page.text
