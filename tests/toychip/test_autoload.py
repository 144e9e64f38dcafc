"""Does ``import torch`` load the chip through the ``torch.backends`` entry-point group?

A real package declares the entry point in its metadata (see toychip._autoload); the test
writes that metadata into a temporary ``*.dist-info`` on the path instead of installing one.
"""
import pytest

from course_models.ch08_models import import_torch_in_subprocess


@pytest.fixture(scope="module")
def entry_point_dir(tmp_path_factory):
    """A site directory holding only the metadata of a package that declares the entry point."""
    site = tmp_path_factory.mktemp("site")
    info = site / "toychip_autoload-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toychip-autoload\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[torch.backends]\ntoychip = toychip:_autoload\n")
    return site


def test_import_torch_loads_the_chip_from_the_entry_point(entry_point_dir):
    assert import_torch_in_subprocess(entry_point_dir) == {"loaded": True, "result": "toychip:0 2"}


def test_autoload_zero_leaves_the_chip_unloaded(entry_point_dir):
    outcome = import_torch_in_subprocess(entry_point_dir, autoload=False)
    assert outcome["loaded"] is False and outcome["result"].startswith("error:")
