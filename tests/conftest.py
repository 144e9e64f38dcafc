import sys
from pathlib import Path

import pytest

# Shared test helpers (notebook builders, wrong answers) live in tests/helpers. Tests are
# imported with --import-mode=importlib, so no test folder can shadow a library package.
sys.path.insert(0, str(Path(__file__).parent / "helpers"))


@pytest.fixture(autouse=True)
def random_numbers_independent_of_test_order():
    """Each test starts from torch's seed 0, whatever ran before it on its xdist worker: a test
    that fails on unlucky random inputs then fails on every run, not once in a few hundred."""
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.manual_seed(0)
