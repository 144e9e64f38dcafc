"""FX graphs as views: one box per node, coloured by opcode, plus before/after diffs.

Chapter 03 shows every graph with these; chapters 05 and 06 reuse them for Dynamo and
AOTAutograd graphs, which are FX graphs too.
"""
from __future__ import annotations

from typing import Iterable, Mapping

import torch
import torch.fx

from .model import GraphView


def _graph_of(obj) -> torch.fx.Graph:
    if isinstance(obj, torch.fx.GraphModule):
        return obj.graph
    if isinstance(obj, torch.fx.Graph):
        return obj
    raise TypeError(f"expected a torch.fx.GraphModule or torch.fx.Graph, got {type(obj).__name__}")


def target_name(node: torch.fx.Node) -> str:
    """A short, stable name for what a node calls (``relu``, ``aten.addmm.default``, ``linear1``)."""
    target = node.target
    if isinstance(target, str):
        return target
    if isinstance(target, torch._ops.OpOverload):
        return str(target)
    return getattr(target, "__name__", repr(target))


def _tensor_summary(value) -> str | None:
    if isinstance(value, torch.Tensor):
        return f"{tuple(value.shape)} {str(value.dtype).replace('torch.', '')}"
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, torch.Tensor) for v in value):
        return ", ".join(_tensor_summary(v) for v in value)
    return None


def node_details(node: torch.fx.Node, module: torch.nn.Module | None = None) -> list[str]:
    """Target line plus shape/dtype when a pass (ShapeProp, make_fx, Dynamo) recorded them."""
    details = []
    if node.op == "call_module" and module is not None:
        try:
            details.append(f"{node.target}: {type(module.get_submodule(node.target)).__name__}")
        except AttributeError:
            details.append(str(node.target))
    elif node.op in ("call_function", "call_method", "get_attr"):
        details.append(target_name(node))
    meta = node.meta.get("tensor_meta")
    if meta is not None and hasattr(meta, "shape"):
        details.append(f"{tuple(meta.shape)} {str(meta.dtype).replace('torch.', '')}")
    elif (summary := _tensor_summary(node.meta.get("val"))) is not None:
        details.append(summary)
    return details


def _module_fingerprint(node: torch.fx.Node, module: torch.nn.Module | None) -> tuple:
    """Class and parameter summary of a called submodule, so swapped weights show as changed."""
    if node.op != "call_module" or module is None:
        return ()
    try:
        submodule = module.get_submodule(node.target)
    except AttributeError:
        return ()
    tensors = [*submodule.named_parameters(), *submodule.named_buffers()]
    return (type(submodule).__name__,
            *((name, tuple(t.shape), round(float(t.detach().double().sum()), 6)) for name, t in tensors))


def _signature(node: torch.fx.Node, module: torch.nn.Module | None) -> tuple:
    """What a node computes, for diffing: opcode, target, the names it reads, its module."""
    return (node.op, target_name(node), repr(node.args), repr(node.kwargs),
            _module_fingerprint(node, module))


def from_fx(obj, groups: Mapping[str, Iterable] | None = None, *, group_kind: str = "group",
            title: str = "") -> GraphView:
    """View of an FX graph; ``groups`` maps a cluster label to nodes (or node names)."""
    graph = _graph_of(obj)
    module = obj if isinstance(obj, torch.fx.GraphModule) else None
    view = GraphView(title=title)
    for node in graph.nodes:
        view.add_node(node.name, node.name, node.op, node_details(node, module))
        for source in node.all_input_nodes:
            view.add_edge(source.name, node.name)
    for label, members in (groups or {}).items():
        names = [m.name if isinstance(m, torch.fx.Node) else str(m) for m in members]
        view.add_cluster(label, label, names, kind=group_kind)
    return view


def diff_fx(before, after, *, title: str = "") -> GraphView:
    """The ``after`` graph with added (+), rewritten (~) and removed (-) nodes marked.

    Nodes are matched by name, which FX keeps stable across in-place passes; run the
    pass on ``copy.deepcopy(gm)`` to keep a ``before``.
    """
    old = {node.name: node for node in _graph_of(before).nodes}
    new = {node.name: node for node in _graph_of(after).nodes}
    before_module = before if isinstance(before, torch.fx.GraphModule) else None
    after_module = after if isinstance(after, torch.fx.GraphModule) else None
    view = from_fx(after, title=title)
    for view_node in view.nodes:
        previous = old.get(view_node.id)
        if previous is None:
            view_node.status = "added"
        elif _signature(previous, before_module) != _signature(new[view_node.id], after_module):
            view_node.status = "changed"
    for edge in view.edges:
        if edge.dst not in old:
            edge.status = "added"
    for name, node in old.items():
        if name in new:
            continue
        view.add_node(name, name, node.op, node_details(node, before_module), status="removed")
        for source in node.all_input_nodes:
            view.add_edge(source.name, name, status="removed")
        for user in node.users:
            if user.name in new:
                view.add_edge(name, user.name, status="removed")
    return view
