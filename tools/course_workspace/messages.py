"""What the learner reads about the workspace: the terminal report and the workspace README
(Simplified Chinese first, then English)."""
from __future__ import annotations

from pathlib import Path

from .placements import Placement, PlacementKind

README_NAME = "README.md"


def shown_path(path: Path, base: Path) -> str:
    """``my-work`` rather than an absolute path when the workspace is inside ``base``."""
    try:
        return str(path.resolve().relative_to(base.resolve()))
    except ValueError:
        return str(path.resolve())


def terminal_report(placements: list[Placement], folder: str) -> str:
    """Lines ``./course`` prints before JupyterLab starts; empty when nothing changed."""
    def names(kind):
        return ", ".join(p.written for p in placements if p.kind is kind)

    lines = []
    if copied := names(PlacementKind.COPIED):
        lines += [f"已复制到你的工作区 {folder}/：{copied}",
                  f"Copied into your workspace {folder}/: {copied}",
                  f"你的答案保存在 {folder}/ 中；git pull 不会改动它。",
                  f"Your answers are saved in {folder}/; git pull does not touch it."]
    if updated := names(PlacementKind.UPDATED):
        lines += [f"已更新为课程的新版本（你没有改过这些副本）：{updated}",
                  f"Updated to the course's new version (you had not changed these copies): {updated}"]
    for p in placements:
        if p.kind is PlacementKind.BESIDE:
            lines += ["",
                      f"注意：课程更新了 {p.notebook}。你改过自己的副本，所以它保持原样；",
                      f"      新版本放在旁边：{folder}/{p.written}（说明见 {folder}/{README_NAME}）。",
                      f"Note: the course updated {p.notebook}. You changed your copy, so it was kept as is;",
                      f"      the new version is beside it: {folder}/{p.written} (see {folder}/{README_NAME})."]
    return "\n".join(lines)


def readme_text(new_versions: list[str], folder: str) -> str:
    """The workspace README; ``new_versions`` are the ``.新版`` files now in the workspace."""
    pending_zh = "".join(f"- `{name}`\n" for name in new_versions) or "（目前没有）\n"
    pending_en = "".join(f"- `{name}`\n" for name in new_versions) or "(none at the moment)\n"
    return f"""# 我的练习 · My work

这个文件夹是你的课程工作区。`./course` 把课程的章节笔记本复制到这里，JupyterLab 打开的也是这里的副本：
你的答案和运行结果都保存在这里。git 忽略这个文件夹，所以 `git pull` 更新课程时不会与你的改动冲突，也不会覆盖它们。

课程更新后，下次运行 `./course` 时：

- 新的章节会复制进来；
- 你没有改过的笔记本会直接换成新版本（只运行过、没有编辑过的也算没改过；重新运行即可得到输出）；
- 你改过的笔记本**保持原样**，新版本放在它旁边，文件名带 `.新版`，例如 `03_fx.新版.ipynb`。
  可以对照两者，把需要的内容复制到自己的文件里；看完后可以删除 `.新版` 文件。

想重做某一章：删除（或改名）它，再运行 `./course`，就会得到一份全新的副本。
在终端检查一整章（在课程根目录运行）：`.venv/bin/python -m grader check {folder}/03_fx.ipynb`

## 有新版本的笔记本

{pending_zh}
---

This folder is your course workspace. `./course` copies the chapter notebooks here and JupyterLab opens
these copies: your answers and outputs are saved here. Git ignores this folder, so `git pull` never
conflicts with or overwrites your work.

After a course update, the next `./course`:

- copies new chapters in;
- replaces notebooks you have not changed with the new version (running cells without editing them does
  not count as a change; run them again to get the outputs back);
- **keeps** notebooks you changed, and puts the new version beside them with `.新版` ("new version") in
  the name, e.g. `03_fx.新版.ipynb`. Compare the two and copy over what you need; then delete the
  `.新版` file.

To redo a chapter, delete (or rename) it and run `./course`: you get a fresh copy.
To check a whole chapter from a terminal (in the course folder):
`.venv/bin/python -m grader check {folder}/03_fx.ipynb`

## Notebooks with a new version

{pending_en}"""
