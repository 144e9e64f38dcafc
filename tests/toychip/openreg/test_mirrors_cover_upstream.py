"""Every test of PyTorch's OpenReg suite has a mirror here, or a stated reason why not.

OpenReg (pytorch/pytorch, test/cpp_extensions/open_registration_extension/torch_openreg) is
PyTorch's reference out-of-tree backend, and its tests are what a port is expected to pass.
Their code is not copied into this repository (the course commits no upstream code, and CI
cannot reach GitHub), so each file here re-checks the same behaviours on the toy chip in the
course's own words: ``test_<name>.py`` mirrors upstream's ``test_<name>.py``, one function per
upstream test, named as upstream names it (without its class). An upstream test that has no
mirror is listed in that module's ``NOT_MIRRORED`` with the reason. ``upstream.json`` lists
the upstream tests and the commit each file was read at.
"""
import ast
import json
from pathlib import Path

import pytest

HERE = Path(__file__).parent
UPSTREAM = json.loads((HERE / "upstream.json").read_text())["files"]


def mirror_module(upstream_file: str) -> tuple[set[str], dict[str, str]]:
    """The test functions a mirror file defines, and its NOT_MIRRORED table (read, not imported)."""
    tree = ast.parse((HERE / upstream_file).read_text())
    tests = {node.name for node in tree.body if isinstance(node, ast.FunctionDef) and node.name.startswith("test")}
    not_mirrored: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "NOT_MIRRORED" for t in node.targets):
            not_mirrored = ast.literal_eval(node.value)
    return tests, not_mirrored


@pytest.mark.parametrize("upstream_file", sorted(UPSTREAM))
def test_each_upstream_test_is_mirrored_or_has_a_reason(upstream_file):
    assert (HERE / upstream_file).is_file(), f"no mirror of OpenReg's {upstream_file}"
    tests, not_mirrored = mirror_module(upstream_file)
    upstream = UPSTREAM[upstream_file]["tests"]
    missing = [name for name in upstream if name.rsplit(".", 1)[-1] not in tests and name not in not_mirrored]
    assert not missing, f"{upstream_file}: neither mirrored nor listed in NOT_MIRRORED: {missing}"
    assert not set(not_mirrored) - set(upstream), "NOT_MIRRORED names tests upstream does not have"
    short = [name for name, reason in not_mirrored.items() if len(reason) < 20]
    assert not short, f"say why each of these is not mirrored: {short}"
    mirrored_twice = [name for name in not_mirrored if name.rsplit(".", 1)[-1] in tests]
    assert not mirrored_twice, f"both mirrored and listed as not mirrored: {mirrored_twice}"


@pytest.mark.parametrize("upstream_file", sorted(UPSTREAM))
def test_a_mirror_file_holds_only_mirrors(upstream_file):
    """Tests of the chip's own behaviour belong beside that behaviour, not in the mirror."""
    tests, _ = mirror_module(upstream_file)
    upstream = {name.rsplit(".", 1)[-1] for name in UPSTREAM[upstream_file]["tests"]}
    assert not tests - upstream, f"{upstream_file} has tests upstream does not: {sorted(tests - upstream)}"
