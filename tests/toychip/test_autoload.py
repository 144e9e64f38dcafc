"""Does ``import torch`` load the chip through the ``torch.backends`` entry-point group?

A real package declares the entry point in its metadata (see toychip._autoload); the test
writes that metadata into a temporary ``*.dist-info`` on the path instead of installing one.
"""
import os
import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent("""
    import sys
    import torch
    loaded = "toychip" in sys.modules
    try:
        x = torch.randn(2, device="toychip")
        result = f"{x.device} {torch.toychip.device_count()}"
    except RuntimeError as e:
        result = "error: " + str(e).splitlines()[0]
    print(loaded, result)
""")


@pytest.fixture(scope="module")
def entry_point_dir(tmp_path_factory):
    """A site directory holding only the metadata of a package that declares the entry point."""
    site = tmp_path_factory.mktemp("site")
    info = site / "toychip_autoload-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toychip-autoload\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[torch.backends]\ntoychip = toychip:_autoload\n")
    return site


def _run(site, autoload: str) -> str:
    env = {**os.environ, "TORCH_DEVICE_BACKEND_AUTOLOAD": autoload,
           "PYTHONPATH": os.pathsep.join([str(site), *sys.path])}
    return subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True,
                          check=True).stdout.strip()


def test_import_torch_loads_the_chip_from_the_entry_point(entry_point_dir):
    assert _run(entry_point_dir, "1") == "True toychip:0 1"


def test_autoload_zero_leaves_the_chip_unloaded(entry_point_dir):
    loaded, result = _run(entry_point_dir, "0").split(" ", 1)
    assert loaded == "False" and result.startswith("error:")
