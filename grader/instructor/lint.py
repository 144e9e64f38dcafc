"""The chapter notebooks checked against the exercise declarations, and fixed where derivable.

An exercise is declared once, in ``grader/chapters``: id, title, points, stub. In the
notebook, its prompt starts with the heading line ``### 练习 <id>：<title>（<points> 分）`` in a
markdown cell, and after the prompt's markdown come the answer cell (the stub) and the check cell. Those
three are derived; ``--fix`` writes them (inserting the two cells after a new prompt).
What only an author can write is reported: a missing prompt, prompts out of order,
graded cells of an undeclared exercise or out of place, a stub whose parameters differ
from the reference's, and an introduction whose count of the chapter's exercises, or
table of sections, disagrees with the declarations.
"""
from __future__ import annotations

import ast
import inspect
import re
from dataclasses import dataclass
from pathlib import Path

import nbformat

from .. import chapters
from ..authoring import Exercise
from ..grading.notebooks import (ANSWER_PREFIX, CHECK_PREFIX, answer_cell, cell_grade_id, check_cell, exercise_id,
                                 grade_id, is_exercise_cell, named_exercises, read_notebook)

HEADING = re.compile(r"^### 练习 (\d\d\.\w+)：.*$", re.MULTILINE)
# "本章有六个练习", "6 个练习": the chapter's count of its exercises, in its introduction.
COUNT = re.compile(r"(本章有|\b)([0-9]+|[一二三四五六七八九十]+) ?个练习")
CHINESE_NUMERALS = "零一二三四五六七八九十"
EXERCISE_ID = re.compile(r"\b\d\d\.[a-z_]+\b")
# A table whose last column is 练习 ("| 节 | 内容 | 练习 |") lists the section of every exercise.
EXERCISE_TABLE = re.compile(r"^\|.*\| 练习 \|$", re.MULTILINE)
INTRODUCTION_CELLS = 3


@dataclass(frozen=True)
class Problem:
    """One disagreement between a notebook and the declarations."""

    notebook: Path
    message: str
    fixable: bool
    fixed: bool = False   # --fix wrote the derived cells

    def __str__(self) -> str:
        state = " (written)" if self.fixed else " (--fix writes it)" if self.fixable else ""
        return f"{self.notebook.name}: {self.message}{state}"


def heading(exercise: Exercise) -> str:
    return f"### 练习 {exercise.id}：{exercise.title}（{exercise.points} 分）"


def lint_notebook(path: Path, fix: bool = False) -> list[Problem]:
    """What disagrees in the chapter notebook at ``path``; with ``fix``, the derivable parts are written
    (and reported as fixed)."""
    path = Path(path)
    notebook = read_notebook(path)
    exercises = chapters.chapter(path.name[:2])
    problems = [Problem(path, message, False) for message in _authored_problems(notebook, exercises)]
    derived = _derived(notebook, exercises)
    if derived.cells != notebook.cells:
        problems += [Problem(path, message, True, fixed=fix) for message in _differences(notebook, derived)]
        if fix:
            nbformat.write(derived, path)
    return problems


def _authored_problems(notebook, exercises: tuple[Exercise, ...]) -> list[str]:
    declared = [e.id for e in exercises]
    return (_prompt_problems(notebook, declared) + _graded_cell_problems(notebook, declared)
            + _stub_problems(exercises) + _introduction_problems(notebook, declared))


def _prompt_problems(notebook, declared: list[str]) -> list[str]:
    prompts = [identifier for cell in notebook.cells for identifier in _prompted(cell)]
    problems = [f"no prompt for {identifier} (a markdown line '### 练习 {identifier}：…')"
                for identifier in declared if identifier not in prompts]
    problems += [f"a prompt or graded cell for {identifier}, which grader/chapters does not declare"
                 for identifier in sorted(set(prompts) | named_exercises(notebook)) if identifier not in declared]
    if [i for i in prompts if i in declared] != [i for i in declared if i in prompts]:
        problems.append(f"the prompts are in the order {prompts}; the declarations' order is {declared}")
    return problems


def _graded_cell_problems(notebook, declared: list[str]) -> list[str]:
    graded = [grade_id(cell) for cell in notebook.cells if "nbgrader" in cell.get("metadata", {})]
    problems = [f"two cells have the grade id {name}" for name in sorted({n for n in graded if graded.count(n) > 1})]
    problems += [f"an nbgrader cell with the grade id {name!r}, which is neither 'answer-CH-NAME' nor 'check-CH-NAME'"
                 for name in graded if not name.startswith((ANSWER_PREFIX, CHECK_PREFIX))]
    return problems + _misplaced(notebook, declared)


def _stub_problems(exercises: tuple[Exercise, ...]) -> list[str]:
    """Stubs whose parameters are not the reference's (the grader calls both the same way)."""
    problems = []
    for exercise in exercises:
        stub = ast.parse(exercise.stub).body[0].args
        stub_parameters = [a.arg for a in stub.posonlyargs + stub.args + stub.kwonlyargs]
        reference_parameters = [name for name, parameter in inspect.signature(exercise.reference_function).parameters.items()
                                if parameter.kind not in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD)]
        if stub_parameters != reference_parameters:
            problems.append(f"{exercise.id}: the stub takes {stub_parameters}, the reference {reference_parameters}")
    return problems


def _introduction_problems(notebook, declared: list[str]) -> list[str]:
    """The chapter's count of its exercises, and the ids its introduction names, against the declarations."""
    introduction = "\n".join(cell.source for cell in notebook.cells[:INTRODUCTION_CELLS] if cell.cell_type == "markdown")
    problems = [f"the introduction says '{match.group(0)}'; the chapter declares {len(declared)}"
                for match in COUNT.finditer(introduction) if _number(match.group(2)) != len(declared)]
    named = set(EXERCISE_ID.findall(introduction)) - {f"{identifier[:2]}.xxx" for identifier in declared}
    problems += [f"the introduction names {identifier}, which grader/chapters does not declare"
                 for identifier in sorted(named - set(declared))]
    if EXERCISE_TABLE.search(introduction):
        problems += [f"the introduction's table of sections leaves out {identifier}"
                     for identifier in declared if identifier not in named]
    return problems


def _misplaced(notebook, declared: list[str]) -> list[str]:
    """Graded cells outside their exercise's prompt (after its heading, before the next one), and
    answer cells whose next code cell is not their check cell (a markdown note may sit between)."""
    problems, current = [], None
    cells = notebook.cells
    present = {grade_id(cell) for cell in cells}
    for index, cell in enumerate(cells):
        current = (_prompted(cell) or [current])[-1]
        if not is_exercise_cell(cell) or exercise_id(grade_id(cell)) not in declared:
            continue
        identifier = exercise_id(grade_id(cell))
        if identifier != current:
            problems.append(f"{grade_id(cell)} is not inside the prompt of {identifier}")
        check = cell_grade_id(CHECK_PREFIX, identifier)
        if grade_id(cell).startswith(ANSWER_PREFIX) and check in present:
            following = next((c for c in cells[index + 1:] if c.cell_type == "code"), None)
            if following is None or grade_id(following) != check:
                problems.append(f"{grade_id(cell)}: the next code cell is not its check cell")
    return problems


def _prompted(cell) -> list[str]:
    """The ids of the exercise prompts that start in ``cell``."""
    return HEADING.findall(cell.source) if cell.cell_type == "markdown" else []


def _number(numeral: str) -> int:
    """``"6"`` → 6, ``"六"`` → 6, ``"十二"`` → 12 (the counts a chapter has)."""
    if numeral.isdigit():
        return int(numeral)
    if "十" not in numeral:
        return CHINESE_NUMERALS.index(numeral)
    tens, _, ones = numeral.partition("十")
    return 10 * (CHINESE_NUMERALS.index(tens) if tens else 1) + (CHINESE_NUMERALS.index(ones) if ones else 0)


def _derived(notebook, exercises: tuple[Exercise, ...]) -> nbformat.NotebookNode:
    """``notebook`` with every declared exercise's heading, answer cell and check cell as derived.

    Graded cells are rewritten where they stand (a missing half of the pair goes next to the
    other); an exercise without either gets both after its prompt's markdown cells."""
    by_id = {e.id: e for e in exercises}
    ids_with_cells = named_exercises(notebook)
    grade_ids = {grade_id(cell) for cell in notebook.cells}
    cells, pending = [], None   # pending: a new prompt's exercise, waiting for the end of its markdown
    for cell in notebook.cells:
        if pending is not None and cell.cell_type != "markdown":
            cells += [answer_cell(pending), check_cell(pending)]
            pending = None
        identifier = exercise_id(grade_id(cell)) if is_exercise_cell(cell) else None
        if identifier in by_id:
            cells += _rewritten(cell, by_id[identifier], grade_ids)
            continue
        prompted = [by_id[i] for i in _prompted(cell) if i in by_id]
        if prompted:
            cell = nbformat.from_dict({**cell, "source": HEADING.sub(
                lambda match: heading(by_id[match.group(1)]) if match.group(1) in by_id else match.group(0),
                cell.source)})
            if prompted[-1].id not in ids_with_cells:
                pending = prompted[-1]
        cells.append(cell)
    if pending is not None:
        cells += [answer_cell(pending), check_cell(pending)]
    derived = nbformat.from_dict(dict(notebook))
    derived.cells = cells
    return derived


def _rewritten(cell, exercise: Exercise, grade_ids: set[str]) -> list:
    """A graded cell made again from the declaration (keeping its cell id), with its partner
    when the notebook lacks that."""
    is_answer = grade_id(cell).startswith(ANSWER_PREFIX)
    made = (answer_cell if is_answer else check_cell)(exercise)
    made["id"] = cell.get("id", made["id"])
    partner = (check_cell if is_answer else answer_cell)(exercise)
    if grade_id(partner) in grade_ids:
        return [made]
    return [made, partner] if is_answer else [partner, made]


def _differences(notebook, derived) -> list[str]:
    """Which derived cells the notebook lacks or holds differently."""
    old = {_key(cell): cell for cell in notebook.cells}
    return [f"{key[1]}: {'missing' if key not in old else 'differs from the declaration'}"
            for cell in derived.cells for key in [_key(cell)]
            if key not in old or (old[key].source, old[key].metadata) != (cell.source, cell.metadata)]


def _key(cell) -> tuple[str, str]:
    """A cell's identity across the derivation: graded cells by grade id, prompts by exercise, the rest by id."""
    if is_exercise_cell(cell):
        return ("graded", grade_id(cell))
    if _prompted(cell):
        return ("prompt", f"the heading of {', '.join(_prompted(cell))}")
    return ("cell", cell.get("id", cell.source))


def lint_course(notebooks_dir: Path, fix: bool = False) -> list[Problem]:
    """Every chapter notebook in ``notebooks_dir``, and a problem for each declared chapter without one."""
    paths = {path.name[:2]: path for path in sorted(Path(notebooks_dir).glob("[0-9][0-9]_*.ipynb"))}
    problems = [Problem(Path(notebooks_dir) / f"{number}_*.ipynb", "no notebook for a declared chapter", False)
                for number in chapters.chapter_modules() if number not in paths]
    for number, path in paths.items():
        problems += lint_notebook(path, fix=fix)
    return problems
