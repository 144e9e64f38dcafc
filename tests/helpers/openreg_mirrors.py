"""The OpenReg mirrors in tests/toychip/openreg: what upstream has, and what each mirror file
holds, read from its source (not imported: a mirror that fails to import is still counted)."""
from __future__ import annotations

import ast
import json
from pathlib import Path

MIRRORS = Path(__file__).parents[1] / "toychip" / "openreg"
UPSTREAM = json.loads((MIRRORS / "upstream.json").read_text())


def mirror_module(upstream_file: str) -> tuple[set[str], dict[str, str]]:
    """The test functions the mirror of ``upstream_file`` defines, and its NOT_MIRRORED table."""
    tree = ast.parse((MIRRORS / upstream_file).read_text())
    tests = {node.name for node in tree.body if isinstance(node, ast.FunctionDef) and node.name.startswith("test")}
    not_mirrored: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "NOT_MIRRORED" for t in node.targets):
            not_mirrored = ast.literal_eval(node.value)
    return tests, not_mirrored
