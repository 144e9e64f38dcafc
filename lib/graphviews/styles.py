"""How each node, cluster and diff status looks, and what that look means.

A style is a small dict of Graphviz attributes. Later chapters register the kinds they
introduce (``register_kind("guard", meaning="守卫 (guard)", fillcolor="#fde2e2")``) instead of
editing a renderer. A look that carries meaning has its legend entry in the ``*_MEANINGS``
table beside its style; the renderer draws a legend from those tables, so a view explains
exactly the colours and marks it uses.
"""
from __future__ import annotations

from dataclasses import dataclass

NODE_STYLES: dict[str, dict[str, str]] = {
    # FX opcodes (chapter 03)
    "placeholder": {"shape": "box", "fillcolor": "#d9ead3"},
    "get_attr": {"shape": "box", "fillcolor": "#fff2cc"},
    "call_function": {"shape": "box", "fillcolor": "#cfe2f3"},
    "call_module": {"shape": "box", "fillcolor": "#d9d2e9"},
    "call_method": {"shape": "box", "fillcolor": "#d0e0e3"},
    "output": {"shape": "box", "fillcolor": "#f4cccc"},
    # Dynamo (chapter 01)
    "graph_break": {"shape": "octagon", "fillcolor": "#f4cccc", "color": "#c62828", "penwidth": "2"},
    # toy chip (chapters 04, 07, 08)
    "chip": {"shape": "box", "fillcolor": "#c9f0d5"},
    "cpu": {"shape": "box", "fillcolor": "#eeeeee"},
    "lazy_op": {"shape": "box", "fillcolor": "#e2e7fd"},
    "dispatch_key": {"shape": "cds", "fillcolor": "#fce5cd"},
}
NODE_MEANINGS: dict[str, str] = {
    "placeholder": "输入 (placeholder)",
    "get_attr": "读取参数/缓冲 (get_attr)",
    "call_function": "调用函数 (call_function)",
    "call_module": "调用子模块 (call_module)",
    "call_method": "调用方法 (call_method)",
    "output": "输出 (output)",
    "graph_break": "图中断 (graph break)",
    "chip": "芯片内核 (chip kernel)",
    "cpu": "CPU 回退 (CPU fallback)",
    "lazy_op": "待执行的惰性算子 (lazy op)",
    "dispatch_key": "调度键 (dispatch key)",
}
DEFAULT_NODE_STYLE = {"shape": "box", "fillcolor": "#ffffff"}

CLUSTER_STYLES: dict[str, dict[str, str]] = {
    "group": {"color": "#888888", "style": "rounded,dashed"},
    "fusion": {"color": "#e69138", "style": "rounded,bold"},
    "chip": {"color": "#38761d", "style": "rounded,filled", "fillcolor": "#f1fbf3"},
    "cpu": {"color": "#666666", "style": "rounded,filled", "fillcolor": "#f7f7f7"},
    "dynamo_graph": {"color": "#3d85c6", "style": "rounded,bold"},
}
CLUSTER_MEANINGS: dict[str, str] = {
    "fusion": "融合组 (fusion group)",
    "chip": "芯片岛 (chip island)",
    "cpu": "CPU 岛 (CPU island)",
    "dynamo_graph": "Dynamo 捕获的一张图 (captured graph)",
}

# Diff colours: green added, red removed (drawn dashed), orange rewritten.
STATUS_STYLES: dict[str, dict[str, str]] = {
    "added": {"color": "#2e7d32", "penwidth": "2.5"},
    "removed": {"color": "#c62828", "penwidth": "2", "style": "filled,dashed", "fontcolor": "#c62828"},
    "changed": {"color": "#ef6c00", "penwidth": "2.5"},
}
EDGE_STATUS_STYLES: dict[str, dict[str, str]] = {
    "added": {"color": "#2e7d32"},
    "removed": {"color": "#c62828", "style": "dashed"},
}
STATUS_MEANINGS: dict[str, str] = {
    "added": "新增 (added)",
    "changed": "改写 (rewritten)",
    "removed": "删除 (removed)",
}

# One-character marks used by the text fallback, where colour is not available.
STATUS_MARKS = {"added": "+", "removed": "-", "changed": "~", None: " "}

# Legend tables by the part of a view they describe, in the order a legend lists them.
MEANINGS = {"status": STATUS_MEANINGS, "node": NODE_MEANINGS, "cluster": CLUSTER_MEANINGS}


@dataclass(frozen=True)
class LegendEntry:
    """One legend line: a diff ``status``, a ``node`` kind or a ``cluster`` kind, and its meaning."""

    part: str
    key: str
    meaning: str


def register_kind(kind: str, *, meaning: str | None = None, **attrs: str) -> None:
    """Give nodes of ``kind`` their own look (Graphviz node attributes) and, if it means
    something the label does not say, the legend text for it."""
    NODE_STYLES[kind] = {**DEFAULT_NODE_STYLE, **attrs}
    if meaning is not None:
        NODE_MEANINGS[kind] = meaning


def register_cluster_kind(kind: str, *, meaning: str | None = None, **attrs: str) -> None:
    """Give clusters of ``kind`` their own frame (Graphviz subgraph attributes) and legend text."""
    CLUSTER_STYLES[kind] = dict(attrs)
    if meaning is not None:
        CLUSTER_MEANINGS[kind] = meaning


def node_style(kind: str, status: str | None) -> dict[str, str]:
    style = {"style": "filled", **NODE_STYLES.get(kind, DEFAULT_NODE_STYLE)}
    return {**style, **STATUS_STYLES.get(status, {})}


def edge_style(status: str | None) -> dict[str, str]:
    return EDGE_STATUS_STYLES.get(status, {})


def cluster_style(kind: str) -> dict[str, str]:
    return CLUSTER_STYLES.get(kind, CLUSTER_STYLES["group"])


def legend_entries(view) -> list[LegendEntry]:
    """What the looks used in ``view`` mean, in table order; empty when nothing needs explaining."""
    used = {
        "status": {item.status for item in [*view.nodes, *view.edges]},
        "node": {node.kind for node in view.nodes},
        "cluster": {cluster.kind for cluster in view.clusters},
    }
    return [LegendEntry(part, key, meaning)
            for part, meanings in MEANINGS.items()
            for key, meaning in meanings.items() if key in used[part]]
