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
import pytest

from openreg_mirrors import MIRRORS, UPSTREAM, mirror_module

FILES = UPSTREAM["files"]


@pytest.mark.parametrize("upstream_file", sorted(FILES))
def test_each_upstream_test_is_mirrored_or_has_a_reason(upstream_file):
    assert (MIRRORS / upstream_file).is_file(), f"no mirror of OpenReg's {upstream_file}"
    tests, not_mirrored = mirror_module(upstream_file)
    upstream = FILES[upstream_file]["tests"]
    missing = [name for name in upstream if name.rsplit(".", 1)[-1] not in tests and name not in not_mirrored]
    assert not missing, f"{upstream_file}: neither mirrored nor listed in NOT_MIRRORED: {missing}"
    assert not set(not_mirrored) - set(upstream), "NOT_MIRRORED names tests upstream does not have"
    short = [name for name, reason in not_mirrored.items() if len(reason) < 20]
    assert not short, f"say why each of these is not mirrored: {short}"
    mirrored_twice = [name for name in not_mirrored if name.rsplit(".", 1)[-1] in tests]
    assert not mirrored_twice, f"both mirrored and listed as not mirrored: {mirrored_twice}"


@pytest.mark.parametrize("upstream_file", sorted(FILES))
def test_a_mirror_file_holds_only_mirrors(upstream_file):
    """Tests of the chip's own behaviour belong beside that behaviour, not in the mirror."""
    tests, _ = mirror_module(upstream_file)
    upstream = {name.rsplit(".", 1)[-1] for name in FILES[upstream_file]["tests"]}
    assert not tests - upstream, f"{upstream_file} has tests upstream does not: {sorted(tests - upstream)}"
