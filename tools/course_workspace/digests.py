"""What counts as "the learner changed this file"."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path


def content_digest(path: Path) -> str:
    """Digest of the part of a file that the learner writes.

    For a notebook that is the list of cells (type and source): opening or running it in
    JupyterLab adds outputs, execution counts, cell ids and metadata, which must not make an
    untouched copy count as the learner's work. Any other file, or a notebook that no longer
    parses, is compared byte for byte.
    """
    data = path.read_bytes()
    if path.suffix == ".ipynb":
        cells = _cells(data)
        if cells is not None:
            return "cells:" + hashlib.sha256(json.dumps(cells, ensure_ascii=False).encode()).hexdigest()
    return "bytes:" + hashlib.sha256(data).hexdigest()


def _cells(data: bytes) -> list[list[str]] | None:
    try:
        cells = json.loads(data)["cells"]
        return [[cell["cell_type"], _text(cell["source"])] for cell in cells]
    except (ValueError, KeyError, TypeError):
        return None


def _text(source: str | list[str]) -> str:
    return source if isinstance(source, str) else "".join(source)
