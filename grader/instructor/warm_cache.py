"""Warm sandboxes: the Inductor cache of a chapter's reference run, kept in the course.

Every sandbox attempt starts in a fresh home, so without this each submission of a chapter
that compiles with Inductor would compile again the kernels every other submission already
compiled (chapter 01: half a minute per submission on 2 cores). ``release`` grades the
instructor's source notebook once, in the sandbox, and keeps what its attempts compiled;
grading then gives every attempt its own copy (:mod:`grader.sandbox.driver`), never the
shared folder itself.
"""
from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

from ..grading.harness import grade_file
from ..sandbox.confinement import Limits


def inductor_cache(course_dir, assignment: str) -> Path:
    return Path(course_dir) / "cache" / "inductor" / assignment


def warm_inductor_cache(course_dir, assignment: str, source: Path, seed: int, limits: Limits) -> None:
    """Grade the assignment's source notebook (the references, with the hidden cases of
    ``seed``) in the sandbox and keep what it compiled."""
    target = inductor_cache(course_dir, assignment)
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    grade_file(source, seed=seed, limits=replace(limits, inductor_cache=str(target), collect_cache=True))


def cache_size(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())
