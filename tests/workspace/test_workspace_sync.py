"""The learner's workspace: copies, updates, and never losing the learner's changes."""
import json
import platform
import subprocess
from pathlib import Path

import nbformat
import pytest

from course_workspace import PlacementKind, sync_workspace
from course_workspace.kernel_metadata import kernel_language_info
from course_workspace.messages import README_NAME, terminal_report

REPO = Path(__file__).resolve().parents[2]


def write_notebook(path: Path, *sources: str) -> None:
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in sources])
    nbformat.write(nb, path)


def edit_answer(path: Path, answer: str) -> None:
    """What a learner does in JupyterLab: change a cell's source and save."""
    nb = nbformat.read(path, as_version=4)
    nb.cells[0].source = answer
    nbformat.write(nb, path)


def run_without_editing(path: Path) -> None:
    """What JupyterLab does to a notebook the learner only ran: outputs, counts, metadata."""
    nb = nbformat.read(path, as_version=4)
    for count, cell in enumerate(nb.cells, 1):
        cell.execution_count = count
        cell.outputs = [nbformat.v4.new_output("stream", text="ran\n")]
    nb.metadata["language_info"] = {"name": "python", "version": "3.11"}
    nbformat.write(nb, path)


def sources(path: Path) -> list[str]:
    return [cell.source for cell in nbformat.read(path, as_version=4).cells]


@pytest.fixture
def course(tmp_path):
    notebooks = tmp_path / "course" / "notebooks"
    notebooks.mkdir(parents=True)
    write_notebook(notebooks / "00_guide.ipynb", "guide v1")
    write_notebook(notebooks / "03_fx.ipynb", "fx v1")
    return notebooks


@pytest.fixture
def workspace(tmp_path):
    return tmp_path / "course" / "my-work"


def test_first_use_copies_every_chapter_and_writes_a_readme(course, workspace):
    placements = sync_workspace(course, workspace)

    assert [(p.written, p.kind) for p in placements] == [
        ("00_guide.ipynb", PlacementKind.COPIED), ("03_fx.ipynb", PlacementKind.COPIED)]
    assert sources(workspace / "03_fx.ipynb") == ["fx v1"]
    assert "git pull" in (workspace / README_NAME).read_text(encoding="utf-8")


def test_second_start_without_course_changes_does_nothing(course, workspace):
    sync_workspace(course, workspace)
    edit_answer(workspace / "03_fx.ipynb", "my answer")

    assert sync_workspace(course, workspace) == []
    assert sources(workspace / "03_fx.ipynb") == ["my answer"]


def test_unchanged_copy_is_updated_in_place(course, workspace):
    sync_workspace(course, workspace)
    write_notebook(course / "03_fx.ipynb", "fx v2")

    placements = sync_workspace(course, workspace)

    assert [(p.written, p.kind) for p in placements] == [("03_fx.ipynb", PlacementKind.UPDATED)]
    assert sources(workspace / "03_fx.ipynb") == ["fx v2"]
    assert not list(workspace.glob("*新版*"))


def test_copy_that_was_only_run_counts_as_unchanged(course, workspace):
    sync_workspace(course, workspace)
    run_without_editing(workspace / "03_fx.ipynb")
    write_notebook(course / "03_fx.ipynb", "fx v2")

    placements = sync_workspace(course, workspace)

    assert [p.kind for p in placements] == [PlacementKind.UPDATED]
    assert sources(workspace / "03_fx.ipynb") == ["fx v2"]


def test_modified_copy_is_kept_and_new_version_arrives_beside_it_with_a_note(course, workspace):
    sync_workspace(course, workspace)
    edit_answer(workspace / "03_fx.ipynb", "my answer")
    write_notebook(course / "03_fx.ipynb", "fx v2")

    placements = sync_workspace(course, workspace)

    assert [(p.written, p.kind) for p in placements] == [("03_fx.新版.ipynb", PlacementKind.BESIDE)]
    assert sources(workspace / "03_fx.ipynb") == ["my answer"]
    assert sources(workspace / "03_fx.新版.ipynb") == ["fx v2"]
    note = terminal_report(placements, folder="my-work")
    assert "my-work/03_fx.新版.ipynb" in note and "注意" in note and "Note:" in note
    assert "- `03_fx.新版.ipynb`" in (workspace / README_NAME).read_text(encoding="utf-8")


def test_later_update_replaces_an_untouched_new_version_file(course, workspace):
    sync_workspace(course, workspace)
    edit_answer(workspace / "03_fx.ipynb", "my answer")
    write_notebook(course / "03_fx.ipynb", "fx v2")
    sync_workspace(course, workspace)
    write_notebook(course / "03_fx.ipynb", "fx v3")

    placements = sync_workspace(course, workspace)

    assert [p.written for p in placements] == ["03_fx.新版.ipynb"]
    assert sources(workspace / "03_fx.新版.ipynb") == ["fx v3"]


def test_later_update_keeps_an_edited_new_version_file(course, workspace):
    sync_workspace(course, workspace)
    edit_answer(workspace / "03_fx.ipynb", "my answer")
    write_notebook(course / "03_fx.ipynb", "fx v2")
    sync_workspace(course, workspace)
    edit_answer(workspace / "03_fx.新版.ipynb", "my answer on v2")
    write_notebook(course / "03_fx.ipynb", "fx v3")

    placements = sync_workspace(course, workspace)

    assert [p.written for p in placements] == ["03_fx.新版2.ipynb"]
    assert sources(workspace / "03_fx.新版.ipynb") == ["my answer on v2"]
    assert sources(workspace / "03_fx.新版2.ipynb") == ["fx v3"]


def test_deleted_new_version_file_is_not_offered_again(course, workspace):
    sync_workspace(course, workspace)
    edit_answer(workspace / "03_fx.ipynb", "my answer")
    write_notebook(course / "03_fx.ipynb", "fx v2")
    sync_workspace(course, workspace)
    (workspace / "03_fx.新版.ipynb").unlink()

    assert sync_workspace(course, workspace) == []
    assert "- `03_fx.新版.ipynb`" not in (workspace / README_NAME).read_text(encoding="utf-8")


def test_new_chapter_is_copied_in(course, workspace):
    sync_workspace(course, workspace)
    write_notebook(course / "04_lazy.ipynb", "lazy v1")

    placements = sync_workspace(course, workspace)

    assert [(p.written, p.kind) for p in placements] == [("04_lazy.ipynb", PlacementKind.COPIED)]
    assert sources(workspace / "04_lazy.ipynb") == ["lazy v1"]


def test_deleted_chapter_comes_back_as_a_fresh_copy(course, workspace):
    sync_workspace(course, workspace)
    (workspace / "03_fx.ipynb").unlink()

    assert [p.kind for p in sync_workspace(course, workspace)] == [PlacementKind.COPIED]
    assert sources(workspace / "03_fx.ipynb") == ["fx v1"]


def test_files_present_before_the_manifest_count_as_the_learners(course, workspace):
    workspace.mkdir()
    write_notebook(workspace / "03_fx.ipynb", "old answer")

    placements = sync_workspace(course, workspace)

    assert ("03_fx.新版.ipynb", PlacementKind.BESIDE) in [(p.written, p.kind) for p in placements]
    assert sources(workspace / "03_fx.ipynb") == ["old answer"]


def test_damaged_manifest_keeps_the_learners_files(course, workspace):
    sync_workspace(course, workspace)
    edit_answer(workspace / "03_fx.ipynb", "my answer")
    (workspace / ".course-manifest.json").write_text("{not json", encoding="utf-8")
    write_notebook(course / "03_fx.ipynb", "fx v2")

    sync_workspace(course, workspace)

    assert sources(workspace / "03_fx.ipynb") == ["my answer"]
    assert json.loads((workspace / ".course-manifest.json").read_text(encoding="utf-8"))["written"]


def test_readme_edited_by_the_learner_is_kept(course, workspace):
    sync_workspace(course, workspace)
    (workspace / README_NAME).write_text("my notes", encoding="utf-8")
    write_notebook(course / "03_fx.ipynb", "fx v2")

    sync_workspace(course, workspace)

    assert (workspace / README_NAME).read_text(encoding="utf-8") == "my notes"


def test_course_notebooks_are_only_read_during_an_update(course, workspace):
    before = {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in course.iterdir()}
    sync_workspace(course, workspace)
    edit_answer(workspace / "03_fx.ipynb", "my answer")
    write_notebook(course / "03_fx.ipynb", "fx v2")
    before[course / "03_fx.ipynb"] = ((course / "03_fx.ipynb").read_bytes(),
                                      (course / "03_fx.ipynb").stat().st_mtime_ns)

    sync_workspace(course, workspace)

    assert {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in course.iterdir()} == before


def test_nothing_in_the_git_checkout_is_modified(tmp_path):
    notebooks = REPO / "notebooks"
    before = {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in notebooks.iterdir()}
    workspace = tmp_path / "my-work"
    sync_workspace(notebooks, workspace)
    edit_answer(workspace / "03_fx.ipynb", "my answer")
    sync_workspace(notebooks, workspace)

    assert {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in notebooks.iterdir()} == before


def test_workspace_folder_is_ignored_by_git():
    result = subprocess.run(["git", "check-ignore", "-q", "my-work/03_fx.ipynb"], cwd=REPO)
    assert result.returncode == 0, "my-work/ must be in .gitignore"


def test_command_line_prints_the_note_in_chinese_and_english(course, workspace, capsys):
    from course_workspace.__main__ import main

    main([str(course), str(workspace)])
    edit_answer(workspace / "03_fx.ipynb", "my answer")
    write_notebook(course / "03_fx.ipynb", "fx v2")
    main([str(course), str(workspace)])

    out = capsys.readouterr().out
    assert "新版本放在旁边" in out and "the new version is beside it" in out


def test_copies_carry_the_kernels_language_info_so_they_open_unmodified(tmp_path):
    """JupyterLab marks a notebook modified on opening when its language_info differs from
    the kernel's; the course cannot know the learner's Python, the copy can."""
    course, workspace = tmp_path / "course", tmp_path / "work"
    course.mkdir()
    write_notebook(course / "03_fx.ipynb", "x = 1")
    sync_workspace(course, workspace)
    copied = nbformat.read(workspace / "03_fx.ipynb", as_version=4)
    assert copied.metadata["language_info"] == kernel_language_info()
    assert copied.metadata["language_info"]["version"] == platform.python_version()
    assert sources(workspace / "03_fx.ipynb") == ["x = 1"]
