"""CJK labels fit their boxes: WebAssembly Graphviz has no fonts and measures CJK text too
narrow, so boxes with CJK text get a width estimated from it; the system dot measures itself."""
import re

import pytest

from graphviews import GraphView, render, to_dot
from graphviews.renderer import legend_dot
from svg_drawings import box_width, node_boxes

MIXED = "调用子模块 (call_module)"  # 5 wide characters and 14 others: 5 + 14 × 0.6 = 13.4 em
WIDE = "第二行：更长的中文说明"  # 11 wide characters (the colon is a full-width one)
# The legend entries this view has, in the legend's order (10 pt, margin 0.08 in).
LEGEND = ("调用函数 (call_function)", "调用子模块 (call_module)")


def cjk_view() -> GraphView:
    view = GraphView()
    view.add_node("mixed", MIXED, "call_module", ["linear1: Linear"])
    view.add_node("wide", WIDE, "call_function")
    view.add_node("ascii", "relu", "call_function", ["aten.relu.default"])
    view.add_edge("mixed", "wide")
    view.add_edge("wide", "ascii")
    return view


def _width(source: str, node_id: str) -> str | None:
    line = next(line for line in source.splitlines() if line.strip().startswith(f'"{node_id}" ['))
    match = re.search(r'\bwidth="([\d.]+)"', line)
    return match and match.group(1)


def _needed_pt(text: str, fontsize: float, margin_in: float) -> float:
    """A lower bound on the box a browser's fonts need: CJK 1 em, the rest 0.5 em (Helvetica's
    letters average less), plus the margins."""
    wide = sum(1 for char in text if "\u3000" <= char <= "\u9fff" or "\uff00" <= char <= "\uffef")
    return (wide + 0.5 * (len(text) - wide)) * fontsize + 2 * margin_in * 72


def test_an_engine_without_font_metrics_gets_widths_estimated_from_cjk_text():
    graph, legend = to_dot(cjk_view(), estimate_text_width=True), legend_dot(cjk_view(), estimate_text_width=True)
    assert _width(graph, "mixed") == f"{13.4 * 11 / 72 + 0.22:.2f}"
    assert _width(graph, "wide") == f"{11 * 11 / 72 + 0.22:.2f}"
    assert _width(graph, "ascii") is None  # its estimate is right already
    assert _width(legend, "__legend_1") == f"{13.4 * 10 / 72 + 0.16:.2f}"


def test_an_engine_with_font_metrics_gets_no_width():
    assert "width=" not in to_dot(cjk_view()) and "width=" not in legend_dot(cjk_view())


def test_cjk_text_fits_its_box_with_webassembly_graphviz(no_system_dot):
    rendered = render(cjk_view())
    assert rendered.engine == "wasm"
    boxes = node_boxes(rendered.svg)
    assert box_width(boxes["mixed"]) >= _needed_pt(MIXED, 11, 0.11)
    assert box_width(boxes["wide"]) >= _needed_pt(WIDE, 11, 0.11) - 0.1
    for index, meaning in enumerate(LEGEND):
        assert box_width(boxes[f"__legend_{index}"]) >= _needed_pt(meaning, 10, 0.08)


def test_the_system_dot_sizes_cjk_boxes_from_real_fonts_not_the_estimate(real_dot):
    if not real_dot:
        pytest.skip("the system Graphviz dot is not installed")
    rendered = render(cjk_view())
    estimated = float(_width(to_dot(cjk_view(), estimate_text_width=True), "mixed")) * 72
    assert rendered.engine == "dot"
    assert box_width(node_boxes(rendered.svg)["mixed"]) < estimated - 5
