import sys
from pathlib import Path

# Test helpers (wrong answers, notebook builders) are plain modules beside the tests.
sys.path.insert(0, str(Path(__file__).parent / "grading"))
sys.path.insert(0, str(Path(__file__).parent))
