"""Chapter 08's capstone in self-study: which pieces of the stack are the learner's own answers?"""
import shutil

import nbformat
import pytest

import grader
from grader.grading.stack_pieces import my_pieces
from notebook_builders import NOTEBOOKS, write_filled
from toychip import stack

YOURS_04 = "你的（第 04 章）"
# "the dispatcher moves a fallback's CPU results back to the chip by itself" (answers_ch07)
RESULTS_LEFT_ON_CPU = """
def chip_fallback(op, *args, **kwargs):
    def on_cpu(value):
        return value.cpu() if isinstance(value, torch.Tensor) else value
    return op(*map(on_cpu, args), **{name: on_cpu(value) for name, value in kwargs.items()})
"""


@pytest.fixture
def workspace(tmp_path):
    folder = tmp_path / "my-work"
    folder.mkdir()
    return folder


def lines_about(output: str) -> dict[str, str]:
    """The printed line of each piece, by its field name."""
    return {field: next(line for line in output.splitlines() if f"（{field}）" in line)
            for field in ("decompositions", "fusion", "fallback")}


def with_cell(path, source: str) -> None:
    """Append a code cell to the notebook at ``path``."""
    notebook = nbformat.read(path, as_version=4)
    notebook.cells.append(nbformat.v4.new_code_cell(source))
    nbformat.write(notebook, path)


def test_does_a_passing_answer_count_and_an_unanswered_one_not(workspace, monkeypatch, capsys):
    write_filled(workspace / "04_lazy.ipynb", notebook_path=NOTEBOOKS / "04_lazy.ipynb")
    with_cell(workspace / "04_lazy.ipynb", 'raise RuntimeError("a cell the answer does not need ran")')
    shutil.copy(NOTEBOOKS / "07_dispatcher.ipynb", workspace)   # as the course delivered it
    monkeypatch.chdir(workspace)                                 # the notebook runs in my-work/
    pieces = grader.my_pieces()
    course = stack.course_pieces()
    assert pieces.owners == {"decompositions": stack.COURSE, "fusion": YOURS_04, "fallback": stack.COURSE}
    assert pieces.fusion.__name__ == "fusion_policy" and pieces.fusion.__module__ == "__main__"
    assert pieces.fallback is course.fallback and pieces.decompositions.keys() == course.decompositions.keys()
    lines = lines_about(capsys.readouterr().out)
    assert "通过了练习 04.fusion_policy 的公开用例" in lines["fusion"]
    assert "你还没有做练习 07.boxed_fallback" in lines["fallback"]
    assert "工作区里没有 my-work/06_aot.ipynb" in lines["decompositions"]


def test_is_a_failing_answer_left_out_and_named(workspace, capsys):
    write_filled(workspace / "07_dispatcher.ipynb", notebook_path=NOTEBOOKS / "07_dispatcher.ipynb",
                 overrides={"07.boxed_fallback": RESULTS_LEFT_ON_CPU})
    write_filled(workspace / "06_aot.ipynb", notebook_path=NOTEBOOKS / "06_aot.ipynb",
                 overrides={"06.decompositions": "def decomposition_table():\n    return {}\n\nundefined_helper()"})
    pieces = my_pieces(workspace)
    assert pieces.owners["fallback"] == pieces.owners["decompositions"] == stack.COURSE
    assert pieces.fallback is stack.course_pieces().fallback
    lines = lines_about(capsys.readouterr().out)
    assert "你的 chip_fallback 没有通过练习 07.boxed_fallback 的公开用例" in lines["fallback"]
    assert "出错：NameError" in lines["decompositions"]


def test_without_a_workspace_are_all_pieces_the_course_s(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    pieces = grader.my_pieces()
    course = stack.course_pieces()
    assert set(pieces.owners.values()) == {stack.COURSE}
    assert pieces.decompositions.keys() == course.decompositions.keys()
    assert (pieces.fusion, pieces.fallback) == (course.fusion, course.fallback)
    assert all("没有找到工作区 my-work/" in line for line in lines_about(capsys.readouterr().out).values())
