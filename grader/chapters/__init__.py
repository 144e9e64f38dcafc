"""Exercise declarations, one module per chapter: ``chNN_<topic>.py`` with a list ``EXERCISES``.

A declaration is the one source of an exercise's id, title, points and answer-cell stub;
``python -m grader lint --fix`` writes the notebook's heading, answer and check cells from it.
The references go in ``solutions/chNN_<topic>.py`` (same file name: each exercise's
reference is ``solutions.chNN_<topic>:<function>`` unless it names another), and the
plausible wrong answers, labelled with their misconceptions, and correct answers written
differently in ``tests/helpers/answers_chNN.py``.

Chapter modules import :mod:`grader.authoring` only, and name their references by string
and never import them: the sandbox imports a chapter module for its ``produce``
functions, and there the solutions are hidden. Modules are imported lazily, once, by
whoever first asks for one of their exercises.
"""
from __future__ import annotations

import dataclasses
import importlib
import pkgutil
from functools import cache

from ..authoring import Exercise
from ..errors import UnknownExercise


@cache
def chapter_modules() -> dict[str, str]:
    """``{"03": "ch03_fx", ...}``: the chapter modules present, without importing them."""
    names = sorted(m.name for m in pkgutil.iter_modules(__path__) if m.name.startswith("ch"))
    return {name[2:4]: name for name in names}


@cache
def chapter(number: str) -> tuple[Exercise, ...]:
    """The exercises of chapter ``number`` ("03"), in notebook order; () if it has none."""
    module_name = chapter_modules().get(number)
    if module_name is None:
        return ()
    module = importlib.import_module(f"{__name__}.{module_name}")
    exercises = tuple(
        exercise if exercise.reference
        else dataclasses.replace(exercise, reference=f"solutions.{module_name}:{exercise.function}")
        for exercise in module.EXERCISES)
    if len({e.id for e in exercises}) != len(exercises):
        raise ValueError(f"{module_name} declares an exercise id twice")
    for exercise in exercises:
        if exercise.chapter != number:
            raise ValueError(f"{module_name} declares {exercise.id}, which belongs to chapter {exercise.chapter}")
    return exercises


def get(exercise_id: str) -> Exercise:
    """One exercise by id ("03.op_census"), loading only its chapter."""
    number = str(exercise_id).split(".", 1)[0]
    found = {e.id: e for e in chapter(number)}
    if exercise_id not in found:
        raise UnknownExercise(exercise_id, found)
    return found[exercise_id]


def every_exercise() -> list[Exercise]:
    """All chapters' exercises, in chapter order (loads every chapter module)."""
    return [exercise for number in chapter_modules() for exercise in chapter(number)]


__all__ = ["chapter", "chapter_modules", "every_exercise", "get"]
