"""Running the chapter notebooks once per content: executed copies are cached by a content hash."""
from __future__ import annotations

import hashlib
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

import nbclient
import nbformat
from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

from .errors import SiteBuildError
from .redaction import without_exercise_outputs

CELL_TIMEOUT_S = 600


def content_key(notebook_path: Path, inputs: list[Path]) -> str:
    """A hash of the notebook and of every file it runs (library code, recorded assets)."""
    digest = hashlib.sha256(notebook_path.read_bytes())
    for path in sorted(inputs):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:20]


def failure(error: Exception) -> str:
    if isinstance(error, CellExecutionError):
        return f"raised {error.ename}: {error.evalue}"
    return f"failed: {str(error).strip().splitlines()[0]}"  # a timeout or a dead kernel


def execute_notebook(source: Path, target: Path) -> Path:
    """Run ``source`` top to bottom in a scratch folder; write it to ``target`` without exercise outputs."""
    notebook = nbformat.read(source, as_version=4)
    running = {"index": 0}
    with tempfile.TemporaryDirectory(prefix=f"site-{source.stem}-") as scratch:
        client = nbclient.NotebookClient(notebook, timeout=CELL_TIMEOUT_S, kernel_name="python3",
                                         resources={"metadata": {"path": scratch}},
                                         on_cell_execute=lambda cell, cell_index: running.update(index=cell_index))
        try:
            client.execute()
        except (CellExecutionError, CellTimeoutError, DeadKernelError) as error:
            index = running["index"]
            first_line = (notebook.cells[index].source.strip().splitlines() or [""])[0]
            raise SiteBuildError(f"{source.name}: cell {index + 1} of {len(notebook.cells)} ({first_line!r}) "
                                 f"{failure(error)}") from None
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".partial")
    nbformat.write(without_exercise_outputs(notebook), partial)
    partial.replace(target)  # a build stopped halfway never leaves a cached half notebook
    return target


def executed_notebooks(notebooks: list[Path], inputs: list[Path], cache: Path, workers: int = 2) -> dict[Path, Path]:
    """Each notebook's executed copy, run only when no copy of the same content is in ``cache``."""
    cached = {path: cache / f"{path.stem}-{content_key(path, inputs)}.ipynb" for path in notebooks}
    missing = [path for path, target in cached.items() if not target.exists()]
    if missing:
        print(f"running {len(missing)} chapter notebook(s), {workers} at a time: "
              + ", ".join(path.name for path in missing), flush=True)
        started = time.monotonic()
        with ProcessPoolExecutor(max_workers=workers) as pool:
            running = {pool.submit(execute_notebook, path, cached[path]): path for path in missing}
            try:
                for done, future in enumerate(as_completed(running), 1):
                    future.result()
                    print(f"  [{done}/{len(missing)}] ran {running[future].name} "
                          f"({time.monotonic() - started:.0f} s since the start)", flush=True)
            except SiteBuildError:
                pool.shutdown(cancel_futures=True)
                raise
    for stale in set(cache.glob("*.ipynb")) - set(cached.values()):
        stale.unlink()
    return cached
