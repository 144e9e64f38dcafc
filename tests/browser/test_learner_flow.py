"""A learner's first hour: ``./course`` → chapter 00 → run chapter 03 → answer an exercise.

The tests share one server and one page and run in file order, like the learner's session."""
import inspect
import re
import time

import pytest

from checkout import checkout_state

pytestmark = pytest.mark.browser


def test_printed_link_goes_to_chapter_00(course_server, lab, session_home):
    assert "/lab/tree/00_guide.ipynb?token=" in course_server.printed_link()
    lab.expect_text(lab.notebook.locator(".jp-Cell").first, "第 00 章")
    assert lab.current_tab_label() == "00_guide.ipynb"
    lab.wait_for_idle_kernel()
    lab.page.screenshot(path=session_home / "chapter-00.png")
    print(f"screenshot: {session_home / 'chapter-00.png'}")
    assert "jp-mod-dirty" not in lab.current_tab().get_attribute("class"), "opened as modified before any edit"


def test_learner_mode_has_no_instructor_tools_and_no_news_popup(lab):
    time.sleep(5)   # the news question is a toast shown shortly after start-up
    assert "Nbgrader" not in lab.menu_bar_labels()
    assert lab.page.locator(".Toastify__toast", has_text=re.compile("news", re.I)).count() == 0
    assert lab.page.get_by_role("button", name=re.compile("^Validate$")).count() == 0
    sidebar_tabs = lab.page.locator(".jp-SideBar .lm-TabBar-tab").all()
    assert not [tab for tab in sidebar_tabs if "nbgrader" in (tab.get_attribute("title") or "").lower()]


def test_run_all_on_chapter_03_executes_the_last_cell(lab):
    lab.open_from_file_browser("03_fx.ipynb")
    lab.wait_for_idle_kernel()
    lab.run_menu("Run All Cells")
    lab.wait_until_run_finished(timeout_s=540)
    last = lab.prompt(lab.code_cells().last)
    assert re.fullmatch(r"\[\d+\]:", last), f"Run All stopped before the last cell (its prompt: {last})"


def test_correct_answer_passes_its_check_cell(lab):
    import solutions.ch03_fx

    reference = inspect.getsource(solutions.ch03_fx.count_ops)
    imports = lab.code_cell_containing("from grader import check")
    answer = lab.code_cell_containing("def count_ops")
    check = lab.code_cell_containing('check("03.op_census")')

    lab.run_cell(imports)
    lab.replace_source(answer, reference)
    lab.run_cell(answer)
    lab.run_cell(check)

    lab.expect_text(check.locator(".jp-OutputArea .grader-passed"), "通过", timeout_s=120)
    lab.save()


def test_answers_go_to_the_workspace_and_the_checkout_stays_clean(course_server, checkout_before):
    course_server.stop()
    saved = (course_server.workspace / "03_fx.ipynb").read_text(encoding="utf-8")
    assert "counts = Counter()" in saved
    status_before, notebooks_before = checkout_before
    status_after, notebooks_after = checkout_state()
    assert set(status_after.splitlines()) - set(status_before.splitlines()) == set()
    assert notebooks_after == notebooks_before
