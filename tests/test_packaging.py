"""Install metadata: environment.yml and pyproject.toml describe the same dependency set, and
`./course`, the README and pyproject.toml state the same Pythons."""
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent


def pyproject_requirements() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return set(project["dependencies"]) | set(project["optional-dependencies"]["dev"])


def conda_pip_requirements() -> set[str]:
    environment = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip_sections = [d["pip"] for d in environment["dependencies"] if isinstance(d, dict)]
    return {r for r in pip_sections[0] if not r.startswith("-e")}


def test_environment_yml_matches_pyproject():
    assert conda_pip_requirements() == pyproject_requirements()


def test_torch_is_pinned_everywhere():
    assert "torch==2.13.*" in pyproject_requirements()
    assert not any(r.startswith("torch") and "==" not in r for r in pyproject_requirements())


def test_environment_yml_brings_graphviz_and_installs_the_project():
    environment = yaml.safe_load((ROOT / "environment.yml").read_text())
    assert "graphviz" in environment["dependencies"]
    assert "-e ." in environment["dependencies"][-1]["pip"]


def fake_python(tmp_path: Path, version: tuple[int, int]) -> Path:
    """An interpreter that runs ``-c CODE`` with ``sys.version_info`` set to ``version``."""
    path = tmp_path / "python"
    path.write_text(f"#!{sys.executable}\nimport sys\nsys.version_info = {(*version, 0, 'final', 0)!r}\n"
                    "exec(sys.argv[2])\n")
    path.chmod(0o755)
    return path


def test_course_refuses_a_python_older_than_the_tested_range_before_installing(tmp_path):
    run = subprocess.run([str(ROOT / "course"), "test"], env={**os.environ, "PYTHON": str(fake_python(tmp_path, (3, 10)))},
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 1 and "3.11–3.13" in run.stderr and "3.10" in run.stderr, run.stderr


def test_readme_pyproject_and_course_state_the_same_tested_pythons():
    tested = re.search(r'^TESTED_PYTHONS="(.+)"$', (ROOT / "course").read_text(), re.M).group(1)
    assert tested == "3.11–3.13"
    readme = (ROOT / "README.md").read_text()
    assert readme.count(f"Python {tested}") >= 2   # the Chinese and the English quick start
    assert tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"] == ">=3.11"
