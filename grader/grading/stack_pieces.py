"""``my_pieces()``: the pieces of chapter 08's capstone stack, from the learner's earlier chapters.

In self-study the capstone's comparison runs the learner's own stack: each piece of
:class:`toychip.stack.Pieces` is the learner's answer to the exercise that built it, where
their workspace holds one, and the course's piece otherwise. An answer counts only if it
passes that exercise's public cases, run as its check cell runs them
(:func:`.selfstudy.run_in_kernel`). Only the answer cell and the cells it needs
(:mod:`.cell_slice`) run, in a namespace of their own; the rest of that notebook does not.
One line per piece says whose it is and why. Grading never uses this: nbgrader grades one
notebook alone, with the course's pieces.
"""
from __future__ import annotations

import contextlib
import io
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch
from IPython import get_ipython
from IPython.core.inputtransformer2 import TransformerManager

from toychip import stack

from .. import chapters
from ..authoring import Exercise
from ..errors import GraderError
from ..sandbox.calls import describe_exception
from .cell_slice import needed_cells
from .harness import learner_cells
from .notebooks import ANSWER_PREFIX, answer_cell, cell_grade_id, grade_id, read_notebook
from .selfstudy import run_in_kernel

# ./course and the hub copy the chapters into this folder and open them there
# (tools/course_workspace), so a notebook's kernel runs in it.
WORKSPACE_NAME = "my-work"


@dataclass(frozen=True)
class EarlierPiece:
    """A piece of the stack and the exercise whose answer it is."""

    field: str          # the field of :class:`toychip.stack.Pieces`
    label: str          # its name in chapter 08's table of pieces
    exercise_id: str
    # the piece made from the learner's function, given the course's pieces
    build: Callable[[Callable, stack.Pieces], object]


PIECES = (
    # A learner's table covers the six activations of chapter 06: the rest stays the chip's.
    EarlierPiece("decompositions", "分解表", "06.decompositions",
                 lambda table, course: {**course.decompositions, **table()}),
    EarlierPiece("fusion", "融合策略", "04.fusion_policy", lambda policy, course: policy),
    EarlierPiece("fallback", "装箱回退", "07.boxed_fallback", lambda fallback, course: fallback),
)


def learner_owner(chapter: str) -> str:
    """How :attr:`toychip.stack.Pieces.owners` names a piece the learner wrote."""
    return f"你的（第 {chapter} 章）"


def find_workspace(folder: Path | None = None) -> Path | None:
    """The learner's workspace, if ``folder`` (default: where this kernel runs) is one."""
    folder = Path.cwd() if folder is None else folder
    return folder if folder.name == WORKSPACE_NAME else None


def my_pieces(workspace: Path | None = None) -> stack.Pieces:
    """The capstone's pieces: the learner's answers in ``workspace`` (default:
    :func:`find_workspace`) where they pass their public cases, else the course's."""
    workspace = find_workspace() if workspace is None else workspace
    course = stack.course_pieces()
    values, owners = {}, {}
    for piece in PIECES:
        values[piece.field], owners[piece.field], why = chosen_piece(piece, workspace, course)
        print(f"{piece.label}（{piece.field}）：{owners[piece.field]}——{why}")
    return stack.Pieces(**values, owners=owners)


def chosen_piece(piece: EarlierPiece, workspace: Path | None, course: stack.Pieces) -> tuple[object, str, str]:
    """The piece, whose it is, and why."""
    exercise = chapters.get(piece.exercise_id)
    function, why = learner_function(workspace, exercise)
    if function is not None:
        try:
            with _contained():
                return piece.build(function, course), learner_owner(exercise.chapter), why
        except BaseException as error:  # passed its cases, yet fails here: the course's piece
            why = f"调用你的 {exercise.function} 出错：{describe_exception(error)}"
    return getattr(course, piece.field), stack.COURSE, why


def learner_function(workspace: Path | None, exercise: Exercise) -> tuple[Callable | None, str]:
    """The learner's answer to ``exercise`` if it passes the public cases, and why (or why not)."""
    notebook, why = answered_notebook(workspace, exercise)
    if notebook is None:
        return None, why
    shown = f"{workspace.name}/{notebook_name(exercise)}"
    with _contained():
        namespace, error = run_answer_cells(notebook, exercise.function)
        result = None if error else run_in_kernel(exercise, namespace.get(exercise.function),
                                                  include_hidden=False, seed=0)
    if error:
        return None, f"运行 {shown} 里练习 {exercise.id} 的答案单元格（和它用到的单元格）出错：{error}"
    if result.unanswered:
        return None, not_answered(exercise, shown)
    if not result.passed:
        failed = sum(not case.verdict.ok for case in result.cases)
        return None, (f"你的 {exercise.function} 没有通过练习 {exercise.id} 的公开用例"
                      f"（{len(result.cases)} 个里 {failed} 个没通过；在 {shown} 里运行它的检查单元格看原因）")
    passed = f"{exercise.function} 通过了练习 {exercise.id} 的公开用例（{shown}）"
    return namespace[exercise.function], passed


def not_answered(exercise: Exercise, shown: str) -> str:
    return f"你还没有做练习 {exercise.id}（{shown}）"


def notebook_name(exercise: Exercise) -> str:
    """``04_lazy.ipynb``: the notebook of ``exercise``'s chapter, named as its declarations' module."""
    return f"{chapters.chapter_modules()[exercise.chapter][2:]}.ipynb"


def answered_notebook(workspace: Path | None, exercise: Exercise) -> tuple[object | None, str]:
    """The workspace's notebook of ``exercise``'s chapter if it holds an answer to try; else None
    and why not (read from the file, nothing run)."""
    if workspace is None or not workspace.is_dir():
        return None, f"没有找到工作区 {WORKSPACE_NAME}/（这个笔记本不是在工作区里打开的）"
    path = workspace / notebook_name(exercise)
    shown = f"{workspace.name}/{path.name}"
    if not path.is_file():
        return None, f"工作区里没有 {shown}"
    try:
        notebook = read_notebook(path)
    except GraderError as error:
        return None, f"读不了 {shown}：{error}"
    answer_id = cell_grade_id(ANSWER_PREFIX, exercise.id)
    answers = [cell for cell in notebook.cells if grade_id(cell) == answer_id]
    if not answers:
        return None, f"{shown} 里没有练习 {exercise.id} 的答案单元格"
    if answers[0].source.strip() == answer_cell(exercise).source.strip():
        return None, not_answered(exercise, shown)
    return notebook, ""


def run_answer_cells(notebook, function: str) -> tuple[dict, str | None]:
    """Run the cells that define ``function`` and what they need, in a fresh namespace; the
    namespace and the first error, described (None: every cell ran)."""
    namespace = {"__name__": "__main__", "get_ipython": get_ipython}
    for index, source in needed_cells(learner_cells(notebook), {function}):
        try:
            code = compile(TransformerManager().transform_cell(source), f"<cell {index}>", "exec")
            exec(code, namespace)
        except BaseException as error:  # learner code may raise anything, SystemExit included
            return namespace, describe_exception(error)
    return namespace, None


@contextlib.contextmanager
def _contained():
    """Loading leaves this kernel as it was: no output, the same RNG state and warning filters."""
    with (contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()),
          warnings.catch_warnings(), torch.random.fork_rng(devices=[])):
        yield
