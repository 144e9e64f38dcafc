"""python -m grader lint: the notebooks agree with the declarations; --fix writes what derives from them."""
import dataclasses
import shutil

import nbformat
import pytest

from grader import chapters
from grader.cli import main
from grader.grading.notebooks import grade_id
from grader.instructor.lint import lint_course, lint_notebook
from notebook_builders import CHAPTER_03, NOTEBOOKS


def test_the_course_notebooks_agree_with_the_declarations():
    assert [str(problem) for problem in lint_course(NOTEBOOKS)] == []


@pytest.fixture
def chapter_03(tmp_path):
    path = tmp_path / CHAPTER_03.name
    shutil.copy(CHAPTER_03, path)
    return path


def edit(path, change):
    notebook = nbformat.read(path, as_version=4)
    change(notebook.cells)
    nbformat.write(notebook, path)


def cell_of(cells, identifier):
    return next(cell for cell in cells if grade_id(cell) == identifier)


def prompt_of(cells, exercise_id):
    return next(cell for cell in cells if cell.cell_type == "markdown" and f"### 练习 {exercise_id}：" in cell.source)


def test_derived_parts_that_drifted_are_reported_and_fix_writes_them_back(chapter_03):
    def drift(cells):
        prompt = prompt_of(cells, "03.op_census")
        prompt.source = prompt.source.replace("（2 分）", "（5 分）")
        cell_of(cells, "check-03-op_census").metadata.nbgrader.points = 5
        cell_of(cells, "check-03-fold_conv_bn").source = 'check("03.fold_conv_bn", hint=True)'
        answer = cell_of(cells, "answer-03-remove_dropout")
        answer.source = answer.source.replace("def remove_dropout(gm", "def remove_dropout(graph")
    edit(chapter_03, drift)
    problems = lint_notebook(chapter_03)
    assert {p.message for p in problems} == {
        "the heading of 03.op_census: differs from the declaration", "check-03-op_census: differs from the declaration",
        "check-03-fold_conv_bn: differs from the declaration", "answer-03-remove_dropout: differs from the declaration"}
    assert all(p.fixable and not p.fixed for p in problems)
    assert all(p.fixed for p in lint_notebook(chapter_03, fix=True))
    assert chapter_03.read_bytes() == CHAPTER_03.read_bytes()


def test_fix_writes_a_new_exercise_s_cells_after_its_prompt(chapter_03):
    edit(chapter_03, lambda cells: [cells.remove(cell_of(cells, f"{kind}-03-op_census")) for kind in ("answer", "check")])
    assert {p.message for p in lint_notebook(chapter_03)} == {
        "answer-03-op_census: missing", "check-03-op_census: missing"}
    lint_notebook(chapter_03, fix=True)
    assert lint_notebook(chapter_03) == []
    fixed, original = (nbformat.read(path, as_version=4).cells for path in (chapter_03, CHAPTER_03))
    assert [(c.source, c.metadata) for c in fixed] == [(c.source, c.metadata) for c in original]


def test_what_only_an_author_can_write_is_reported_and_left_alone(chapter_03):
    def misplace(cells):
        cells[1].source += "\n\n本章有 99 个练习。"
        cells.append(nbformat.v4.new_markdown_cell("### 练习 03.nope：不存在（1 分）"))
        cells.remove(cell_of(cells, "check-03-node_profiler"))
        answer = cell_of(cells, "answer-03-node_profiler")
        cells.remove(answer)
        cells.insert(3, answer)
        prompt = prompt_of(cells, "03.fusion_groups")
        prompt.source = prompt.source.replace("### 练习 03.fusion_groups：", "### 练习 03.fusion_group：")
    edit(chapter_03, misplace)
    before = chapter_03.read_bytes()
    authored = {p.message for p in lint_notebook(chapter_03, fix=True) if not p.fixable}
    assert authored == {
        f"the introduction says '99 个练习'; the chapter declares {len(chapters.chapter('03'))}",
        "a prompt or graded cell for 03.nope, which grader/chapters does not declare",
        "a prompt or graded cell for 03.fusion_group, which grader/chapters does not declare",
        "no prompt for 03.fusion_groups (a markdown line '### 练习 03.fusion_groups：…')",
        "answer-03-fusion_groups is not inside the prompt of 03.fusion_groups",
        "check-03-fusion_groups is not inside the prompt of 03.fusion_groups",
        "answer-03-node_profiler is not inside the prompt of 03.node_profiler"}
    assert chapter_03.read_bytes() != before   # the missing check cell was written, the rest left


def test_a_stub_whose_parameters_differ_from_the_reference_s_is_reported(chapter_03, monkeypatch):
    exercises = chapters.chapter("03")
    renamed = dataclasses.replace(exercises[0], stub=exercises[0].stub.replace("(gm:", "(graph:"))
    monkeypatch.setattr(chapters, "chapter", lambda number: (renamed,) + exercises[1:])
    messages = {p.message for p in lint_notebook(chapter_03)}
    assert "03.op_census: the stub takes ['graph'], the reference ['gm']" in messages


def test_the_command_exits_1_and_says_how_many_problems_remain(chapter_03, capsys):
    edit(chapter_03, lambda cells: setattr(cell_of(cells, "check-03-op_census").metadata.nbgrader, "points", 7))
    assert main(["lint", str(chapter_03)]) == 1
    assert "1 problems; `python -m grader lint --fix` writes 1 of them" in capsys.readouterr().out
    assert main(["lint", "--fix", str(chapter_03)]) == 0
    assert "in agreement with grader/chapters" in capsys.readouterr().out
