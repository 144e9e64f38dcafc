"""Legends: every view explains the colours and marks it uses, and only those, in a compact
graph of its own beside or above the view's graph."""
import re
from xml.etree import ElementTree

import pytest

from graphviews import GraphView, render, to_dot, to_text
from graphviews import styles
from graphviews.compose import LEGEND_ID_PREFIX
from graphviews.renderer import legend_dot
from graphviews.styles import legend_entries, register_kind
from svg_drawings import nested_drawings, node_boxes


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
    assert legend_dot(view) is None and "图例" not in to_text(view)


@pytest.fixture
def guard_kind():
    """A kind a later chapter registers with its meaning; unregistered afterwards."""
    register_kind("guard", meaning="守卫 (guard)", fillcolor="#fde2e2")
    yield "guard"
    del styles.NODE_STYLES["guard"], styles.NODE_MEANINGS["guard"]


def test_a_kind_a_chapter_registers_with_a_meaning_joins_the_legend(guard_kind):
    view = GraphView()
    view.add_node("g", "x.size(0) == 8", guard_kind)
    source = legend_dot(view)
    assert "subgraph cluster_legend" in source and '"守卫 (guard)"' in source
    assert 'fillcolor="#fde2e2"' in source and "legend" not in to_dot(view)


def tall_diff(length: int = 4, direction: str = "TB") -> GraphView:
    """A chain with every diff status: a legend of three rows beside a graph of ``length`` ranks."""
    view = GraphView(direction=direction)
    view.add_node("x", "x", "placeholder")
    for index in range(length):
        status = ("added", "changed", "removed", None)[index % 4]
        view.add_node(f"n{index}", f"n{index}", "call_function", status=status)
        view.add_edge("x" if index == 0 else f"n{index - 1}", f"n{index}")
    return view


def _centres(boxes) -> list[tuple[float, float]]:
    return [((left + right) / 2, (top + bottom) / 2) for left, top, right, bottom in boxes]


def test_the_legends_rows_are_closer_together_than_the_graphs_ranks(engine):
    boxes = node_boxes(render(tall_diff()).svg)
    legend_rows = sorted({y for _, y in _centres(b for name, b in boxes.items() if name.startswith("__legend_"))})
    graph_ranks = sorted({y for _, y in _centres(b for name, b in boxes.items() if not name.startswith("__legend_"))})
    assert len(legend_rows) == 3 and len(graph_ranks) == 5
    legend_pitch = max(b - a for a, b in zip(legend_rows, legend_rows[1:]))
    assert legend_pitch < 0.6 * min(b - a for a, b in zip(graph_ranks, graph_ranks[1:]))


def test_the_legend_keeps_its_entries_in_order_along_rows_and_down_columns(engine):
    centres = _centres(node_boxes(render(tall_diff()).svg)[f"__legend_{i}"] for i in range(5))
    (x0, y0), (x1, y1), (x2, y2), (x3, y3), (x4, y4) = centres
    assert x0 < x1 and x2 < x3 and y0 == y1 < y2 == y3 < y4


def _corners(svg: str) -> list[tuple[float, float]]:
    corners = (re.search(r'x="([\d.]+)" y="([\d.]+)"', tag).groups() for tag in nested_drawings(svg))
    return [(float(x), float(y)) for x, y in corners]


def test_the_legend_goes_beside_a_graph_that_leaves_room_and_above_one_that_does_not(engine):
    graph, legend = _corners(render(tall_diff()).svg)
    assert graph == (0, 0) and legend[0] > 0 and legend[1] == 0
    graph, legend = _corners(render(tall_diff(16, direction="LR")).svg)
    assert legend == (0, 0) and graph[0] == 0 and graph[1] > 0


def test_the_composed_svg_is_well_formed_and_its_ids_do_not_collide(engine):
    svg = render(tall_diff()).svg
    ElementTree.fromstring(svg.encode())  # an <img> shows nothing of a malformed SVG
    ids = re.findall(r'\bid="([^"]*)"', svg)
    legend_ids = [i for i in ids if i.startswith(LEGEND_ID_PREFIX)]
    assert len(ids) == len(set(ids)) and "graph0" in ids and f"{LEGEND_ID_PREFIX}graph0" in legend_ids
