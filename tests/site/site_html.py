"""Reading built HTML pages: their text, their links and assets, and which of those are broken."""
from __future__ import annotations

from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

LINK_ATTRIBUTES = {"href", "src"}
SKIPPED_TAGS = {"script", "style"}


class Page(HTMLParser):
    """One page: its visible text, every (tag, attribute, URL) it refers to, its tags' classes."""

    def __init__(self, path: Path):
        super().__init__()
        self.path, self.links, self.classes, self.tags = path, [], set(), []
        self._text, self._skipping = [], 0
        self.feed(path.read_text(encoding="utf-8"))
        self.text = "".join(self._text)

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self._skipping += tag in SKIPPED_TAGS
        for name, value in attrs:
            if name in LINK_ATTRIBUTES and value:
                self.links.append((tag, name, value))
            if name == "class" and value:
                self.classes.update(value.split())

    def handle_endtag(self, tag):
        self._skipping -= tag in SKIPPED_TAGS and self._skipping > 0

    def handle_data(self, data):
        if not self._skipping:
            self._text.append(data)


def is_remote(url: str) -> bool:
    parts = urlsplit(url)
    return bool(parts.scheme and parts.scheme != "file") or url.startswith("//")


def broken_links(page: Page, root: Path) -> list[str]:
    """The page's links to files of the site (``root``) that are not there, as ``page -> url``."""
    broken = []
    for _, _, url in page.links:
        parts = urlsplit(url)
        if is_remote(url) or not parts.path:  # a fragment of the same page, or another site
            continue
        target = (page.path.parent / unquote(parts.path)).resolve()
        if target.is_dir():
            target = target / "index.html"
        if not target.is_file() or root.resolve() not in target.parents:
            broken.append(f"{page.path.relative_to(root)} -> {url}")
    return broken


def remote_assets(page: Page) -> list[str]:
    """Scripts, stylesheets and images the page would fetch from another site (links to read are fine)."""
    return [url for tag, _, url in page.links if tag != "a" and is_remote(url)]
