"""Screenshots of the pages open when a browser test fails, so that CI's log can name them."""
from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

_open_pages: list = []
taken: list[Path] = []


@contextmanager
def open_page(browser, **options):
    """A new page of ``browser`` that :func:`take` screenshots while it is open."""
    page = browser.new_page(**options)
    _open_pages.append(page)
    try:
        yield page
    finally:
        _open_pages.remove(page)
        page.close()


def take(folder: Path, test_name: str) -> list[str]:
    """Screenshot every open page into ``folder``; what could not be taken, and why."""
    folder.mkdir(parents=True, exist_ok=True)
    problems = []
    for number, page in enumerate(_open_pages):
        path = folder / f"{test_name}-{number}.png"
        try:
            page.screenshot(path=path, full_page=True)
        except Exception as error:  # noqa: BLE001 -- a closed page must not hide the failure
            problems.append(f"{path}: not taken ({error})")
        else:
            taken.append(path)
    return problems
