"""How each node, cluster and diff status looks.

A style is a small dict of Graphviz attributes. Later chapters register the kinds they
introduce (``register_kind("guard", fillcolor="#fde2e2")``) instead of editing a renderer.
"""
from __future__ import annotations

NODE_STYLES: dict[str, dict[str, str]] = {
    # FX opcodes (chapter 03)
    "placeholder": {"shape": "box", "fillcolor": "#d9ead3"},
    "get_attr": {"shape": "box", "fillcolor": "#fff2cc"},
    "call_function": {"shape": "box", "fillcolor": "#cfe2f3"},
    "call_module": {"shape": "box", "fillcolor": "#d9d2e9"},
    "call_method": {"shape": "box", "fillcolor": "#d0e0e3"},
    "output": {"shape": "box", "fillcolor": "#f4cccc"},
    # toy chip (chapters 04, 07, 08)
    "chip": {"shape": "box", "fillcolor": "#c9f0d5"},
    "cpu": {"shape": "box", "fillcolor": "#eeeeee"},
    "lazy_op": {"shape": "box", "fillcolor": "#e2e7fd"},
    "dispatch_key": {"shape": "cds", "fillcolor": "#fce5cd"},
}
DEFAULT_NODE_STYLE = {"shape": "box", "fillcolor": "#ffffff"}

CLUSTER_STYLES: dict[str, dict[str, str]] = {
    "group": {"color": "#888888", "style": "rounded,dashed"},
    "fusion": {"color": "#e69138", "style": "rounded,bold"},
    "chip": {"color": "#38761d", "style": "rounded,filled", "fillcolor": "#f1fbf3"},
    "cpu": {"color": "#666666", "style": "rounded,filled", "fillcolor": "#f7f7f7"},
}

# Diff colours: green added, red removed (drawn dashed), orange rewritten.
STATUS_STYLES: dict[str, dict[str, str]] = {
    "added": {"color": "#2e7d32", "penwidth": "2.5"},
    "removed": {"color": "#c62828", "penwidth": "2", "style": "filled,dashed", "fontcolor": "#c62828"},
    "changed": {"color": "#ef6c00", "penwidth": "2.5"},
}

# One-word legend used by the text fallback, where colour is not available.
STATUS_MARKS = {"added": "+", "removed": "-", "changed": "~", None: " "}


def register_kind(kind: str, **attrs: str) -> None:
    """Give nodes of ``kind`` their own look (Graphviz node attributes)."""
    NODE_STYLES[kind] = {**DEFAULT_NODE_STYLE, **attrs}


def register_cluster_kind(kind: str, **attrs: str) -> None:
    """Give clusters of ``kind`` their own frame (Graphviz subgraph attributes)."""
    CLUSTER_STYLES[kind] = dict(attrs)


def node_style(kind: str, status: str | None) -> dict[str, str]:
    style = {"style": "filled", **NODE_STYLES.get(kind, DEFAULT_NODE_STYLE)}
    return {**style, **STATUS_STYLES.get(status, {})}


def cluster_style(kind: str) -> dict[str, str]:
    return CLUSTER_STYLES.get(kind, CLUSTER_STYLES["group"])
