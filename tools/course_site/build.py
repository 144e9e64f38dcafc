"""Assembling the site's sources (config, landing page, executed chapters) and rendering them with Sphinx."""
from __future__ import annotations

import shutil
from pathlib import Path

from .errors import SiteBuildError
from .execution import executed_notebooks

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"
SITE_CONFIG = ROOT / "site"
# What the notebooks run besides themselves: a change here re-executes them (tools/ is not run).
RUN_INPUTS = [ROOT / "lib", ROOT / "assets", ROOT / "grader"]
RUN_INPUT_SUFFIXES = {".py", ".yaml", ".json"}
DEFAULT_OUTPUT = ROOT / "build" / "site"
DEFAULT_CACHE = ROOT / ".cache" / "site"
# Written into every built site: only a folder holding it (or an empty one) is ever replaced.
SITE_MARKER = ".built-by-course-site"


def chapter_notebooks() -> list[Path]:
    return sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))


def check_replaceable(output: Path) -> None:
    """Refuse an output folder with other files in it: building replaces the whole folder."""
    if output.exists() and (not output.is_dir() or (any(output.iterdir()) and not (output / SITE_MARKER).is_file())):
        raise SiteBuildError(f"{output} exists and is not a site built by ./course site; "
                             "name a new or empty folder with --output (building replaces the whole folder)")


def run_inputs() -> list[Path]:
    return [path for folder in RUN_INPUTS for path in folder.rglob("*") if path.suffix in RUN_INPUT_SUFFIXES]


def assemble_sources(chapters: dict[Path, Path], sources: Path) -> None:
    """A fresh Sphinx source folder: the landing page of ``site/`` and the chapters (times kept: Sphinx
    then rereads only what changed)."""
    shutil.rmtree(sources, ignore_errors=True)
    shutil.copytree(SITE_CONFIG, sources, ignore=shutil.ignore_patterns("conf.py", "__pycache__"))
    (sources / "chapters").mkdir()
    for notebook, executed in chapters.items():
        shutil.copy2(executed, sources / "chapters" / notebook.name)


def build_site(output: Path = DEFAULT_OUTPUT, cache: Path = DEFAULT_CACHE, workers: int = 2) -> Path:
    """Build the site into ``output`` and return its ``index.html``; raises if a cell or Sphinx fails."""
    from sphinx.cmd.build import build_main  # the optional `site` extra

    check_replaceable(output)
    chapters = executed_notebooks(chapter_notebooks(), run_inputs(), cache / "executed", workers=workers)
    sources, html = cache / "sources", cache / "html"
    assemble_sources(chapters, sources)
    print(f"rendering {len(chapters)} chapters and the index with Sphinx into {output}", flush=True)
    # -W: a warning (a missing image, a broken cross-reference) fails the build; -q: only problems.
    # Sphinx writes into the cache (myst-nb puts its jupyter_execute/ beside the html folder).
    status = build_main(["-b", "html", "-q", "-W", "--keep-going", "-c", str(SITE_CONFIG),
                         "-d", str(cache / "doctrees"), str(sources), str(html)])
    if status != 0:
        raise SiteBuildError(f"sphinx-build failed (exit status {status}); its messages are above")
    shutil.rmtree(output, ignore_errors=True)
    shutil.copytree(html, output, ignore=shutil.ignore_patterns(".buildinfo*", ".doctrees"))
    (output / SITE_MARKER).write_text("built by ./course site; the next build replaces this folder\n")
    return output / "index.html"
