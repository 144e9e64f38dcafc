"""Graphviz engines for the visualizer tests: the system dot where installed, and WebAssembly."""
import os

import pytest

import graphviews
from graphviews import engines

REQUIRE_SYSTEM_DOT = "GRAPHVIEWS_REQUIRE_SYSTEM_DOT"  # set by .ci/run once it has installed Graphviz


@pytest.fixture
def real_dot() -> bool:
    """Whether Graphviz's own dot is installed (it must be where .ci/run installed it)."""
    installed = graphviews.find_dot() is not None
    assert installed or not os.environ.get(REQUIRE_SYSTEM_DOT), f"{REQUIRE_SYSTEM_DOT} is set but dot is not on PATH"
    return installed


@pytest.fixture
def no_system_dot(monkeypatch):
    monkeypatch.setattr(engines, "find_dot", lambda: None)


@pytest.fixture(params=["dot", "wasm"])
def engine(request, real_dot, monkeypatch) -> str:
    """Each engine in turn: the system dot (skipped where it is not installed), then WebAssembly."""
    if request.param == "dot" and not real_dot:
        pytest.skip("the system Graphviz dot is not installed")
    if request.param == "wasm":
        monkeypatch.setattr(engines, "find_dot", lambda: None)
    return request.param
