"""Rendering: SVG through Graphviz, and a readable fallback when it is missing or broken."""
import pytest

import graphviews
from graphviews import GraphView, render
from graphviews import renderer as render_module


def small_view() -> GraphView:
    view = GraphView(title='a "quoted" title')
    view.add_node("x", "x", "placeholder", ["(2, 3) float32"])
    view.add_node("relu", "relu", "call_function", ["relu"], status="changed")
    view.add_node("out", "output", "output")
    view.add_edge("x", "relu")
    view.add_edge("relu", "out")
    view.add_cluster("g", "fusion group 0", ["relu"], kind="fusion")
    return view


def test_dot_source_has_nodes_edges_clusters_and_escaped_quotes():
    source = graphviews.to_dot(small_view())
    assert '"x" -> "relu"' in source
    assert "subgraph cluster_0" in source
    assert '\\"quoted\\"' in source


def test_svg_when_dot_is_installed():
    assert graphviews.find_dot() is not None, "tests expect Graphviz (apt-get install graphviz)"
    rendered = render(small_view())
    bundle = rendered._repr_mimebundle_()
    assert "image/svg+xml" in bundle and "<svg" in bundle["image/svg+xml"]


def test_missing_dot_falls_back_to_text_with_one_install_hint(monkeypatch):
    monkeypatch.setattr(render_module, "find_dot", lambda: None)
    bundle = render(small_view())._repr_mimebundle_()
    assert "image/svg+xml" not in bundle
    assert "relu" in bundle["text/plain"] and "<- x" in bundle["text/plain"]
    assert bundle["text/html"].count("apt-get install graphviz") == 1


def test_failing_dot_falls_back_instead_of_raising(monkeypatch):
    monkeypatch.setattr(render_module, "find_dot", lambda: "/bin/false")
    rendered = render(small_view())
    assert rendered.svg is None and "失败" in rendered.problem


def test_save_dot_and_text_work_without_graphviz(tmp_path, monkeypatch):
    monkeypatch.setattr(render_module, "find_dot", lambda: None)
    rendered = render(small_view())
    assert "digraph" in rendered.save(tmp_path / "g.dot").read_text()
    assert "~ [call_function] relu" in rendered.save(tmp_path / "g.txt").read_text()
    with pytest.raises(RuntimeError, match="Graphviz"):
        rendered.save(tmp_path / "g.svg")


def test_save_svg_and_png_with_graphviz(tmp_path):
    rendered = render(small_view())
    assert rendered.save(tmp_path / "g.svg").read_text().lstrip().startswith("<?xml")
    assert rendered.save(tmp_path / "g.png").read_bytes()[:4] == b"\x89PNG"
    with pytest.raises(ValueError, match="unsupported"):
        rendered.save(tmp_path / "g.jpeg")


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
