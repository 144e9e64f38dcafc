"""What ``run_autograder`` runs on Gradescope for each submission.

Every notebook in ``submission/`` is graded through the isolated harness on the bundle's
own exercise list and secret seed, unless its graded cells name only other chapters
(a renamed or unreadable notebook is still graded: it scores what it can, with a reason).
The best-scoring notebook counts. (If this cannot even start, ``run_autograder`` still
writes a results.json that says so.)
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from ... import chapters
from ...errors import GraderError
from ...grading.harness import SOLUTIONS_DIR
from ...grading.notebooks import named_exercises, read_notebook
from ...sandbox.confinement import Limits
from ..batch import grade_record
from ..reports import gradescope_results, write_results_json
from ..seed import course_seed
from .bundle import BUNDLE_FILE, SECRET_DIR


def _other_chapter(path: Path, chapter: str) -> bool:
    """Do the notebook's graded cells name exercises of other chapters only?"""
    try:
        notebook = read_notebook(path)
    except GraderError:
        return False
    named = {identifier.split(".")[0] for identifier in named_exercises(notebook)}
    return bool(named) and chapter not in named


def submitted_notebooks(submission: Path, chapter: str) -> tuple[list[Path], list[Path]]:
    """(notebooks to grade, notebooks of other chapters) in ``submission``."""
    found = sorted(p for p in submission.rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts)
    others = [p for p in found if _other_chapter(p, chapter)]
    return [p for p in found if p not in others], others


def grade_submission(root: Path) -> dict:
    """The results.json content for the submission under ``root`` (Gradescope's /autograder)."""
    source = root / "source"
    manifest = json.loads((source / BUNDLE_FILE).read_text(encoding="utf-8"))
    chapter, exercises = manifest["chapter"], [chapters.get(i) for i in manifest["exercises"]]
    notebooks, others = submitted_notebooks(root / "submission", chapter)
    skipped = [f"已忽略 {p.name}：它属于其他章节。" for p in others]
    if not notebooks:
        message = f"没有找到第 {chapter} 章的笔记本：请提交你完成的 {chapter}_*.ipynb 文件。"
        return {"score": 0, "tests": [], "output": "\n".join([message, *skipped]), "stdout_visibility": "hidden"}
    secret = source / SECRET_DIR
    limits = Limits(protected_paths=(str(SOLUTIONS_DIR), str(secret.resolve())))
    seed = course_seed(secret)
    graded = [(path, grade_record(path, exercises, seed, limits)) for path in notebooks]
    best_path, best = max(graded, key=lambda item: item[1]["points"])
    results = gradescope_results(best)
    lines = [f"评分的笔记本：{best_path.name}（{best['points']:g}/{best['max_points']:g} 分）"]
    lines += [f"另一份笔记本 {path.name}：{record['points']:g} 分，未计入（只计得分最高的一份）。"
              for path, record in graded if path != best_path]
    results["output"] = "\n".join([*lines, *skipped, results.get("output", "")]).strip()
    return results


def main(argv: list[str]) -> int:
    root = Path(argv[0] if argv else "/autograder")
    start = time.monotonic()
    results = grade_submission(root)
    results["execution_time"] = round(time.monotonic() - start)
    write_results_json(results, root / "results" / "results.json")
    print(json.dumps({"score": results["score"], "output": results.get("output", "")}, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
