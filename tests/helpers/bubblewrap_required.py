"""The fixture of every test that needs bubblewrap (``apt-get install bubblewrap``).

Without it such tests are skipped with that reason, unless GRADER_REQUIRE_BUBBLEWRAP=1
(CI, after installing it) makes that a failure.
"""
import os

import pytest

from grader.sandbox import filesystem_view


@pytest.fixture(autouse=True)
def bubblewrap():
    if filesystem_view.bwrap() is None:
        if os.environ.get("GRADER_REQUIRE_BUBBLEWRAP") == "1":
            pytest.fail("GRADER_REQUIRE_BUBBLEWRAP=1 but bubblewrap is missing or cannot make namespaces here")
        pytest.skip(f"bubblewrap is not installed or cannot run here ({filesystem_view.INSTALL_HINT})")
