"""Every chapter's catalogue of answers (``answers_chNN.py`` beside this file), in one place.

Tests paste a chapter's module into notebooks graded in the sandbox, where the solutions
are hidden, so it is self-contained once its :mod:`mutants` (a reference with one mistake,
written as that mistake) are written out. It declares, with plain tuples:

- ``WRONG_ANSWERS``: ``(exercise id, function, misconception)``: a mistake a learner who
  read only the section would make, and the belief it embodies, in one line;
- ``HIDDEN_ONLY``: ``{function: why}`` for a wrong answer that no public case can show
  (only designed hidden cases reject it), with the reason;
- ``RIGHT_ANSWERS``: ``(exercise id, function, how it differs from the reference)``:
  correct answers written differently, which every case must accept.
"""
import importlib
from pathlib import Path
from typing import Callable, NamedTuple


class Wrong(NamedTuple):
    exercise_id: str
    function: Callable
    misconception: str
    hidden_only: str   # why only the designed hidden cases can reject it; "" when the public ones must


class Right(NamedTuple):
    exercise_id: str
    function: Callable
    how: str


def _modules():
    return [importlib.import_module(path.stem) for path in sorted(Path(__file__).parent.glob("answers_ch*.py"))]


WRONG_ANSWERS = [Wrong(identifier, function, misconception, getattr(module, "HIDDEN_ONLY", {}).get(function, ""))
                 for module in _modules() for identifier, function, misconception in module.WRONG_ANSWERS]
RIGHT_ANSWERS = [Right(*entry) for module in _modules() for entry in getattr(module, "RIGHT_ANSWERS", [])]
