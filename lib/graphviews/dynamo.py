"""Dynamo captures as views: every graph of one function in its own frame, with the graph
breaks between them as red octagons that say why Dynamo stopped and where.

Importing this module registers the adapter, so chapter 01 can show what
``torch._dynamo.explain`` found::

    import graphviews.dynamo
    show(torch._dynamo.explain(fn)(x))        # graph 0 → break 1 → graph 1 → ...
    show(from_graphs(recorded_graphs))        # graphs a custom backend collected

Breaks are drawn in the order Dynamo met them, each between the graph that ended there and
the graph that resumed after it (the FX ``output`` of one, the first node of the next).
"""
from __future__ import annotations

from collections.abc import Sequence

import torch.fx
from torch._dynamo.backends.debugging import ExplainOutput

from .adapters import to_view
from .fx import from_fx
from .model import GraphView

GRAPH_BREAK = "graph_break"
MAX_TEXT = 64  # characters of a reason or source line shown in a box


def _clip(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= MAX_TEXT else text[:MAX_TEXT - 1] + "…"


def break_details(reason) -> list[str]:
    """The first line of a ``GraphCompileReason`` and the user line it points at."""
    lines = [_clip(reason.reason.strip().splitlines()[0])] if reason.reason.strip() else []
    stack = getattr(reason, "user_stack", None) or []
    if stack:
        frame = stack[-1]
        lines.append(f"{frame.filename.rsplit('/', 1)[-1]}:{frame.lineno}")
        if frame.line:
            lines.append(_clip(frame.line.split("#")[0].strip()))
    return lines


def _op_count(gm: torch.fx.GraphModule) -> int:
    return sum(node.op.startswith("call_") for node in gm.graph.nodes)


def from_graphs(graphs: Sequence[torch.fx.GraphModule], break_reasons: Sequence = (), *,
                title: str = "") -> GraphView:
    """All ``graphs`` of one function as frames, with ``break_reasons`` between them."""
    view = GraphView(title=title)
    firsts, outputs = [], []
    for index, gm in enumerate(graphs):
        inner, prefix = from_fx(gm), f"g{index}."
        for node in inner.nodes:
            view.add_node(prefix + node.id, node.label, node.kind, node.details)
        for edge in inner.edges:
            view.add_edge(prefix + edge.src, prefix + edge.dst, edge.label)
        ids = [prefix + node.id for node in inner.nodes]
        view.add_cluster(f"graph{index}", f"graph {index} ({_op_count(gm)} ops)", ids, kind="dynamo_graph")
        firsts.append(ids[0])
        outputs.append(ids[-1])
    for index, reason in enumerate(break_reasons):
        break_id = f"break{index}"
        view.add_node(break_id, f"graph break {index + 1}", GRAPH_BREAK, break_details(reason))
        if index < len(outputs):
            view.add_edge(outputs[index], break_id)
        if index + 1 < len(firsts):
            view.add_edge(break_id, firsts[index + 1], "resume")
    return view


def from_explain(explained: ExplainOutput, *, title: str = "") -> GraphView:
    """View of ``torch._dynamo.explain(fn)(*args)``: its graphs and its break reasons."""
    title = title or f"{explained.graph_count} graph(s), {explained.graph_break_count} graph break(s)"
    return from_graphs(explained.graphs, explained.break_reasons, title=title)


to_view.register(ExplainOutput, from_explain)
