"""Running notebooks for the site: a failing cell is named, an unchanged notebook is not run again."""
import re

import nbformat
import nbformat.v4 as nbf
import pytest

from course_site.build import ROOT, run_inputs
from course_site.errors import SiteBuildError
from course_site.execution import executed_notebooks


def write_notebook(path, *sources):
    nbformat.write(nbf.new_notebook(cells=[nbf.new_code_cell(s) for s in sources]), path)
    return path


@pytest.mark.parametrize("broken, failure", [("y = 1 / 0  # the broken one", "raised ZeroDivisionError"),
                                              ("import os; os._exit(1)", "failed: Kernel died")])
def test_a_failing_cell_stops_the_build_naming_chapter_and_cell(tmp_path, broken, failure):
    notebook = write_notebook(tmp_path / "09_broken.ipynb", "x = 1", broken, "print('never run')")
    with pytest.raises(SiteBuildError, match=rf"^09_broken\.ipynb: cell 2 of 3 \({re.escape(repr(broken))}\) {failure}"):
        executed_notebooks([notebook], [], tmp_path / "cache", workers=1)
    assert list((tmp_path / "cache").glob("*.ipynb")) == []


def test_an_unchanged_notebook_is_served_from_the_cache_and_a_changed_one_runs_again(tmp_path):
    runs = tmp_path / "runs.txt"
    count_run = f"open({str(runs)!r}, 'a').write('x')"
    notebook = write_notebook(tmp_path / "09_demo.ipynb", count_run, "print('shown')")
    first = executed_notebooks([notebook], [], tmp_path / "cache", workers=1)[notebook]
    assert executed_notebooks([notebook], [], tmp_path / "cache", workers=1)[notebook] == first
    assert runs.read_text() == "x"
    assert nbformat.read(first, as_version=4).cells[1].outputs[0].text == "shown\n"

    write_notebook(notebook, count_run, "print('changed')")
    second = executed_notebooks([notebook], [], tmp_path / "cache", workers=1)[notebook]
    assert runs.read_text() == "xx" and second != first
    assert list((tmp_path / "cache").glob("*.ipynb")) == [second]  # the stale copy is gone


def test_library_code_and_recorded_assets_are_run_inputs_but_the_site_builder_is_not():
    inputs = run_inputs()
    names = {path.name for path in inputs}
    assert {"native_functions.yaml", "ch01_gpu_timings.json", "compiler.py"} <= names
    assert not any(path.is_relative_to(ROOT / "tools") for path in inputs)
