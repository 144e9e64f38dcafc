"""Install metadata: environment.yml and pyproject.toml describe the same dependency set."""
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
