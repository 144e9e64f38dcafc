"""Tests of the built executed edition (marker ``site``): ``./course site`` first, then
``pytest -m site tests/site``. They fail, never skip, when the site is missing, so CI cannot
pass without building it."""
import sys
from pathlib import Path

import pytest

from course_site.build import DEFAULT_OUTPUT

sys.path.insert(0, str(Path(__file__).parent))  # site_html, the checker the tests share


def pytest_configure(config):
    config.addinivalue_line("markers", "site: reads the site built by ./course site (outside ./course test)")


@pytest.fixture(scope="session")
def built_site():
    if not (DEFAULT_OUTPUT / "index.html").is_file():
        pytest.fail(f"the site is not built ({DEFAULT_OUTPUT}/index.html is missing): run ./course site first")
    return DEFAULT_OUTPUT
