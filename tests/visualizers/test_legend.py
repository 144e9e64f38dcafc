"""Legends: every view explains the colours and marks it uses, and only those."""
import pytest

from graphviews import GraphView, to_dot, to_text
from graphviews import styles
from graphviews.styles import legend_entries, register_kind


def diff_view(statuses) -> GraphView:
    view = GraphView()
    view.add_node("x", "x", "placeholder")
    for index, status in enumerate(statuses):
        view.add_node(f"n{index}", f"n{index}", "call_function", status=status)
        view.add_edge("x", f"n{index}", status=status)
    return view


def test_a_diff_legend_lists_only_the_statuses_the_view_uses():
    meanings = [e.meaning for e in legend_entries(diff_view(["added", "changed", None]))]
    assert meanings == ["新增 (added)", "改写 (rewritten)", "输入 (placeholder)", "调用函数 (call_function)"]


def test_an_edge_status_alone_puts_it_in_the_legend():
    view = diff_view([None])
    view.add_edge("n0", "x", status="removed")
    assert "删除 (removed)" in [e.meaning for e in legend_entries(view)]


def test_the_text_legend_uses_the_marks_of_the_text_view():
    text = to_text(diff_view(["added", "changed", "removed"]))
    legend = text[text.index("图例 (legend):"):].splitlines()
    assert legend[1:4] == ["  + 新增 (added)", "  ~ 改写 (rewritten)", "  - 删除 (removed)"]
    assert "  [placeholder] 输入 (placeholder)" in legend


def test_islands_fusion_groups_and_graph_breaks_are_named_in_chinese_and_english():
    view = GraphView()
    for kind in ("chip", "cpu", "fusion"):
        view.add_node(kind, kind, "unstyled")
        view.add_cluster(kind, f"{kind} 0", [kind], kind=kind)
    view.add_node("break0", "graph break 1", "graph_break")
    text = to_text(view)
    for line in ("{chip} 芯片岛 (chip island)", "{cpu} CPU 岛 (CPU island)",
                 "{fusion} 融合组 (fusion group)", "[graph_break] 图中断 (graph break)"):
        assert line in text


def test_a_view_whose_looks_mean_nothing_has_no_legend():
    view = GraphView(title="labels say it all")
    view.add_node("a", "aten::relu", "unstyled")
    view.add_cluster("g", "group", ["a"])
    assert legend_entries(view) == []
    assert "cluster_legend" not in to_dot(view) and "图例" not in to_text(view)


@pytest.fixture
def guard_kind():
    """A kind a later chapter registers with its meaning; unregistered afterwards."""
    register_kind("guard", meaning="守卫 (guard)", fillcolor="#fde2e2")
    yield "guard"
    del styles.NODE_STYLES["guard"], styles.NODE_MEANINGS["guard"]


def test_a_kind_a_chapter_registers_with_a_meaning_joins_the_legend(guard_kind):
    view = GraphView()
    view.add_node("g", "x.size(0) == 8", guard_kind)
    source = to_dot(view)
    assert "subgraph cluster_legend" in source and '"守卫 (guard)"' in source
    assert 'fillcolor="#fde2e2"' in source[source.index("cluster_legend"):]
