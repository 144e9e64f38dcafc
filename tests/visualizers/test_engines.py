"""The WebAssembly Graphviz engine: compiled once, reset after a failure, cached on disk."""
import os
import subprocess
import sys

import pytest

from graphviews import engines

GOOD_DOT = 'digraph G { x -> relu; relu [label="relu\\n中文"]; }'
BAD_DOT = "digraph G { x -> ; }"


class CountingCompiler:
    """Compiles the real WebAssembly Graphviz and counts how often it had to."""

    def __init__(self):
        self.calls = 0

    def __call__(self):
        self.calls += 1
        return engines._compile_wasm_graphviz()


def test_wasm_engine_compiles_once_and_reuses_the_instance():
    compiler = CountingCompiler()
    engine = engines.WasmGraphviz(compiler)
    outputs = [engine.render(GOOD_DOT, "svg") for _ in range(3)]
    assert compiler.calls == 1
    assert all(b"<svg" in svg and "中文".encode() in svg for svg in outputs)


def test_wasm_engine_reports_bad_dot_and_still_draws_the_next_graph():
    compiler = CountingCompiler()
    engine = engines.WasmGraphviz(compiler)
    with pytest.raises(engines.EngineFailed, match="Failed to parse DOT source"):
        engine.render(BAD_DOT, "svg")
    assert b"<svg" in engine.render(GOOD_DOT, "svg")
    assert compiler.calls == 2  # the instance that failed was dropped


def test_wasm_trap_becomes_engine_failed_and_drops_the_instance():
    import wasmtime

    class TrappingBackend:
        def render(self, source, **options):
            raise wasmtime.Trap("wasm trap: uninitialized element")

    engine = engines.WasmGraphviz(TrappingBackend)
    with pytest.raises(engines.EngineFailed, match="uninitialized element"):
        engine.render(GOOD_DOT, "svg")
    assert engine._backend is None


def test_wasm_engine_is_missing_when_wasmtime_cannot_be_imported(monkeypatch):
    monkeypatch.setitem(sys.modules, "wasmtime", None)
    with pytest.raises(engines.EngineMissing, match="未安装"):
        engines.WasmGraphviz().render(GOOD_DOT, "svg")


def test_render_dot_never_raises_and_names_the_reasons(monkeypatch):
    monkeypatch.setattr(engines, "find_dot", lambda: None)
    output = engines.render_dot(BAD_DOT, "svg")
    assert output.data is None and output.engine is None
    assert "未找到 Graphviz 的 dot 程序" in output.problem and "Failed to parse" in output.problem


def test_wasm_module_compiles_through_the_wasmtime_disk_cache(tmp_path):
    """A fresh process with an empty cache folder must fill it (later processes then skip compiling)."""
    env = {**os.environ, "HOME": str(tmp_path), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    code = "from graphviews import engines; engines._compile_wasm_graphviz()"
    subprocess.run([sys.executable, "-c", code], env=env, check=True, timeout=120)
    assert [path for path in tmp_path.rglob("*") if path.is_file()], "wasmtime wrote no cache file"
