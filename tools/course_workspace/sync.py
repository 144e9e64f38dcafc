"""Bring the course's chapter notebooks into the learner's workspace without losing work.

Rules, per chapter notebook:
- missing from the workspace (first use, a new chapter, or the learner deleted it to start
  over): copied in;
- the course version is the one last delivered: nothing to do;
- otherwise the new version goes to the first of ``03_fx.ipynb``, ``03_fx.新版.ipynb``,
  ``03_fx.新版2.ipynb``, ... that is absent or still exactly as the course wrote it, so a
  file the learner changed is never overwritten.
"""
from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

from .digests import content_digest
from .kernel_metadata import write_for_this_kernel
from .manifest import Manifest
from .messages import README_NAME, readme_text, shown_path
from .placements import Placement, PlacementKind

NEW_VERSION_MARK = "新版"   # "new version": the learner sees it in the file name


def sync_workspace(course_dir: Path, workspace: Path) -> list[Placement]:
    """Copy or update every ``*.ipynb`` of ``course_dir`` into ``workspace``; only the
    workspace is written."""
    workspace.mkdir(parents=True, exist_ok=True)
    manifest = Manifest.load(workspace)
    placements = []
    for source in sorted(course_dir.glob("*.ipynb")):
        course_digest = content_digest(source)
        placement = _place(source, course_digest, workspace, manifest)
        manifest.delivered[source.name] = course_digest
        if placement:
            placements.append(placement)
    _write_readme(workspace, manifest, folder=shown_path(workspace, course_dir.parent))
    manifest.save(workspace)
    return placements


def _place(source: Path, course_digest: str, workspace: Path, manifest: Manifest) -> Placement | None:
    if not (workspace / source.name).exists():
        _write(source, workspace / source.name, manifest)
        return Placement(source.name, source.name, PlacementKind.COPIED)
    if manifest.delivered.get(source.name) == course_digest:
        return None
    for name in _candidate_names(source.name):
        target = workspace / name
        if target.exists():
            current = content_digest(target)
            if current == course_digest:
                return None
            if current != manifest.written.get(name):
                continue    # the learner's work: never overwritten
        _write(source, target, manifest)
        kind = PlacementKind.UPDATED if name == source.name else PlacementKind.BESIDE
        return Placement(source.name, name, kind)


def _candidate_names(name: str) -> Iterator[str]:
    stem, suffix = name.rsplit(".", 1)
    yield name
    yield f"{stem}.{NEW_VERSION_MARK}.{suffix}"
    for number in itertools.count(2):
        yield f"{stem}.{NEW_VERSION_MARK}{number}.{suffix}"


def _write(source: Path, target: Path, manifest: Manifest) -> None:
    write_for_this_kernel(source, target)
    manifest.written[target.name] = content_digest(target)


def _write_readme(workspace: Path, manifest: Manifest, folder: str) -> None:
    """Refresh the workspace README unless the learner has edited it."""
    path = workspace / README_NAME
    if path.exists() and content_digest(path) != manifest.written.get(README_NAME):
        return
    new_versions = sorted(p.name for p in workspace.glob(f"*.{NEW_VERSION_MARK}*.ipynb"))
    path.write_text(readme_text(new_versions, folder), encoding="utf-8")
    manifest.written[README_NAME] = content_digest(path)
