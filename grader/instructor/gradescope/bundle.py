"""``python -m grader gradescope-bundle CHAPTER OUT.zip``: the zip Gradescope builds its image from.

Layout (Gradescope unzips it to ``/autograder/source``)::

    setup.sh, run_autograder    Gradescope's two entry points (templates beside this module)
    requirements.txt            pyproject.toml's dependencies, torch pinned to this machine's version
    bundle.json                 the chapter and its exercise ids: submissions cannot change them
    secret/.grader_seed         the hidden cases' seed (the sandbox is kept out of secret/)
    course/                     grader/, solutions/, lib/, pyproject.toml, README.md

The package trees are copied, not built into a wheel: the grader then runs on Gradescope
from the same layout as in a checkout (``solutions/`` beside ``grader/``, the sandbox's
import roots on ``PYTHONPATH``), the layout the course's tests exercise.
"""
from __future__ import annotations

import importlib.metadata
import json
import os
import re
import time
import tomllib
import zipfile
from pathlib import Path

from ... import chapters
from ...errors import GraderError
from ..seed import SEED_FILE, course_seed, new_seed

TEMPLATES = Path(__file__).resolve().parent
CHECKOUT = TEMPLATES.parents[2]
COURSE_FILES = ("grader", "solutions", "lib", "pyproject.toml", "README.md")
SKIPPED = ("__pycache__", ".pyc", ".egg-info", "_build")  # _build: this machine's toychip runtime
BUNDLE_FILE = "bundle.json"
SECRET_DIR = "secret"
COURSE_DIR = "course"


def chapter_number(text: str) -> str:
    """``3``, ``03`` or ``ch03`` → ``03``, a chapter with exercises; otherwise a clear error."""
    number = str(text).lower().removeprefix("ch").zfill(2)
    if not chapters.chapter(number):
        raise GraderError(f"unknown chapter {text!r}: the course's chapters are {', '.join(chapters.chapter_modules())}")
    return number


def torch_pin() -> str:
    """The torch this course runs on here, without its local label (``2.13.0+cpu`` → ``2.13.0``)."""
    return f"torch=={importlib.metadata.version('torch').split('+')[0]}"


def requirements() -> str:
    """pyproject.toml's dependencies as they are pinned there, with torch pinned exactly."""
    project = tomllib.loads((CHECKOUT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    lines = [torch_pin() if re.match(r"torch\b(?![-_.])", dependency) else dependency
             for dependency in project["dependencies"]]
    return "# Written by `python -m grader gradescope-bundle` from pyproject.toml.\n" + "\n".join(lines) + "\n"


def _course_files():
    """(path in the checkout, name in the bundle) of every file the course's packages need."""
    for name in COURSE_FILES:
        top = CHECKOUT / name
        for path in sorted(top.rglob("*")) if top.is_dir() else [top]:
            if path.is_file() and not any(part.endswith(SKIPPED) for part in path.relative_to(CHECKOUT).parts):
                yield path, f"{COURSE_DIR}/{path.relative_to(CHECKOUT).as_posix()}"


def _add_text(archive: zipfile.ZipFile, name: str, text: str, mode: int = 0o644) -> None:
    info = zipfile.ZipInfo(name, date_time=time.localtime()[:6])
    info.external_attr = mode << 16
    info.compress_type = zipfile.ZIP_DEFLATED
    archive.writestr(info, text)


def build_bundle(chapter: str, out, *, seed_from=None) -> dict:
    """Write the bundle for ``chapter`` to ``out``; return what it holds (for the CLI's summary).

    Everything is checked before anything is written, and the zip appears only complete.
    """
    number = chapter_number(chapter)
    seed = course_seed(Path(seed_from)) if seed_from is not None else new_seed()
    out = Path(out)
    if out.is_dir():
        raise GraderError(f"{out} is a directory; give the path of the zip file to write")
    exercises = chapters.chapter(number)
    manifest = {"chapter": number, "exercises": [e.id for e in exercises]}
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(out.name + ".partial")
    try:
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as archive:
            setup = (TEMPLATES / "setup.sh").read_text(encoding="utf-8").replace("@TORCH_PIN@", torch_pin())
            _add_text(archive, "setup.sh", setup, 0o755)
            _add_text(archive, "run_autograder", (TEMPLATES / "run_autograder").read_text(encoding="utf-8"), 0o755)
            _add_text(archive, "requirements.txt", requirements())
            _add_text(archive, BUNDLE_FILE, json.dumps(manifest, indent=1) + "\n")
            _add_text(archive, f"{SECRET_DIR}/{SEED_FILE}", str(seed), 0o600)
            for path, name in _course_files():
                archive.write(path, name)
        os.replace(partial, out)
    finally:
        partial.unlink(missing_ok=True)
    return {**manifest, "points": sum(e.points for e in exercises), "path": str(out.resolve())}
