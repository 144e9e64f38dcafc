"""Graph visualizers for the course: FX graphs, pass diffs, and any view a chapter adds.

    from graphviews import show, show_diff
    show(gm)                     # SVG inline in JupyterLab (text if Graphviz is missing)
    show_diff(before, after)     # what a pass added, rewrote and removed
    show(gm).save("graph.svg")

A chapter that brings a new kind of graph registers an adapter::

    @to_view.register(MyIR)
    def _(ir, **options) -> GraphView: ...

TorchScript IR views (chapter 02) are registered on import; Dynamo views (chapter 01:
graphs with their breaks) come with ``import graphviews.dynamo``, which loads Dynamo.
"""
from __future__ import annotations

from . import torchscript  # noqa: F401  (registers TorchScript IR views, chapter 02)
from .adapters import to_view
from .fx import diff_fx, from_fx, target_name
from .model import GraphView, ViewCluster, ViewEdge, ViewNode
from .renderer import RenderedGraph, find_dot, render, to_dot, to_text
from .styles import register_cluster_kind, register_kind


def show(obj, **options) -> RenderedGraph:
    """Render anything :func:`to_view` understands; the result displays itself in Jupyter."""
    return render(to_view(obj, **options))


def show_diff(before, after, *, title: str = "") -> RenderedGraph:
    """Render an FX pass as a diff: + added, ~ rewritten, - removed nodes."""
    return render(diff_fx(before, after, title=title))


__all__ = [
    "GraphView", "ViewNode", "ViewEdge", "ViewCluster", "RenderedGraph",
    "to_view", "show", "show_diff", "render", "to_dot", "to_text", "find_dot",
    "from_fx", "diff_fx", "target_name", "register_kind", "register_cluster_kind",
]
