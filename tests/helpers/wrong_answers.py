"""Every chapter's plausible wrong answers (``wrong_chNN.py`` beside this file), in one list."""
import importlib
from pathlib import Path

WRONG_ANSWERS = [
    answer
    for path in sorted(Path(__file__).parent.glob("wrong_ch*.py"))
    for answer in importlib.import_module(path.stem).WRONG_ANSWERS
]
