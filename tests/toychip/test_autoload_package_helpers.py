"""course_models.ch08_models' packaging helpers: a pyproject's torch.backends entry point,
installed as a dist-info beside its module, loads the chip when a fresh interpreter imports torch."""
from course_models import ch08_models as models

PYPROJECT = ('[project]\nname = "{name}"\nversion = "0.1"\n\n'
             '[project.entry-points."{group}"]\ntoychip = "{name}:_autoload"\n')
MODULE = "def _autoload():\n    import toychip\n"


def test_an_installed_entry_point_loads_the_chip_in_a_fresh_interpreter(tmp_path):
    files = {"pyproject": PYPROJECT.format(name="chip_plugin", group="torch.backends"), "module": MODULE}
    assert models.install_package(tmp_path, "chip_plugin", files) is None
    assert (tmp_path / "chip_plugin-0.1.dist-info" / "entry_points.txt").read_text().startswith("[torch.backends]")
    assert models.import_torch_in_subprocess(tmp_path) == {"loaded": True, "result": "toychip:0 2"}


def test_a_malformed_pyproject_is_reported(tmp_path):
    assert "TOML" in models.install_package(tmp_path, "p", {"pyproject": "[project", "module": MODULE})
