import sys
from pathlib import Path

# Shared test helpers (notebook builders, wrong answers) live in tests/helpers. Tests are
# imported with --import-mode=importlib, so no test folder can shadow a library package.
sys.path.insert(0, str(Path(__file__).parent / "helpers"))
