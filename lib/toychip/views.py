"""Hooks for the course's visualisers: plain :class:`graphviews.model.GraphView` data.

* :func:`dispatch_keys_view` -- the dispatch keys of a tensor, in the order the
  dispatcher visits them (chapter 07);
* :func:`partition_view` -- a compiled ATen graph with its chip islands, CPU islands and
  fusion groups as clusters (chapter 06);
* :func:`lazy_ir_view` -- the pending lazy IR, with the pointwise chains that
  materialisation will fuse, or the groups a plugged-in fusion policy chose (chapter 04);
* :func:`sync_timeline_view` -- the graphs lazy mode ran, in order, each with the reason
  it had to run (a planned ``mark_step`` or a barrier such as ``.item()``) (chapter 04).

Rendering is :mod:`graphviews`' job; these functions only build the data.
"""
from __future__ import annotations

import torch
import torch.fx as fx
from graphviews.model import GraphView
from graphviews.styles import register_kind

from . import lazy_tensor

# What each key of a toychip tensor does when the dispatcher reaches it.
_KEY_ROLES = {
    "AutocastPrivateUse1": "mixed precision: cast inputs (off unless autocast is on)",
    "AutogradPrivateUse1": "autograd: record grad_fn for backward",
    "ADInplaceOrView": "bump version counters, set up views",
    "PrivateUse1": "the backend: toychip kernels (op table or CPU fallback)",
    "Python": "a __torch_dispatch__ mode (lazy tracer) intercepts the op",
}


def dispatch_keys_view(tensor: torch.Tensor) -> GraphView:
    """The tensor's dispatch key set as a chain, highest priority first.

    The keys are taken off the set one by one with its own API (``highestPriorityTypeId``,
    ``remove``), not parsed from its printout: one tensor has one backend, so each key taken
    is a key the dispatcher can visit."""
    keys = []
    keyset = torch._C._dispatch_keys(tensor)
    while (key := keyset.highestPriorityTypeId()) != torch._C.DispatchKey.Undefined:
        keys.append(key.name)
        keyset = keyset.remove(key)
    view = GraphView(title=f"dispatch keys of a {tensor.device} tensor", direction="LR")
    previous = None
    for key in keys:
        view.add_node(key, key, "dispatch_key", [_KEY_ROLES.get(key, "")])
        if previous is not None:
            view.add_edge(previous, key, "redispatch")
        previous = key
    return view


def _node_details(node: fx.Node) -> list[str]:
    val = node.meta.get("val")
    details = []
    if node.op == "call_function":
        details.append(str(node.target).removeprefix("aten."))
    if isinstance(val, torch.Tensor):
        details.append(f"{str(val.dtype).removeprefix('torch.')}{list(val.shape)}")
    return details


def _add_graph(view: GraphView, graph: fx.Graph, kind_of=lambda n: n.op) -> None:
    for node in graph.nodes:
        view.add_node(node.name, node.name, kind_of(node), _node_details(node))
        for arg in node.all_input_nodes:
            view.add_edge(arg.name, node.name)


def partition_view(compiled=None) -> GraphView:
    """Chip islands (``chip``), CPU islands (``cpu``) and fusion groups (``fusion``).

    ``compiled`` is a :class:`toychip.compiler.CompiledGraph` (default: the newest one
    compiled) or an ATen ``fx.GraphModule`` with ``meta["val"]``, which is then
    partitioned here without being compiled.
    """
    from . import compiler  # loads Dynamo: only for views of compiled graphs

    if compiled is None:
        compiled = compiler.COMPILED[-1]
    if isinstance(compiled, fx.GraphModule):
        compiled = compiler.partition_only(compiled)
    if not isinstance(compiled, compiler.CompiledGraph):
        raise TypeError(f"partition_view expects a toychip CompiledGraph or an ATen fx.GraphModule, "
                        f"got {type(compiled).__name__}; call it with no argument for the newest compiled graph")
    view = GraphView(title=f"toychip {compiled.kind} graph: chip and CPU islands")
    _add_graph(view, compiled.graph)
    on_chip = set().union(*compiled.partitions) if compiled.partitions else set()
    for i, names in enumerate(compiled.partitions):
        ordered = [n.name for n in compiled.graph.nodes if n.name in names]
        view.add_cluster(f"chip_island_{i}", f"chip island {i}", ordered, kind="chip")
    run: list[str] = []
    cpu_islands = []
    for node in compiled.graph.nodes:
        if node.op == "call_function" and node.name not in on_chip:
            run.append(node.name)
        elif run:
            cpu_islands.append(run)
            run = []
    if run:
        cpu_islands.append(run)
    for i, names in enumerate(cpu_islands):
        view.add_cluster(f"cpu_island_{i}", f"CPU island {i} (fallback)", names, kind="cpu")
    for program in compiled.programs:
        for group in program.groups:
            if group.kind == "fused":
                view.add_cluster(f"{program.name}.{group.name}", f"{group.name}: {group.label}",
                                 [n.name for n in group.nodes], kind="fusion")
    return view


def lazy_ir_view(tensors=None, fusion=None) -> GraphView:
    """The pending lazy IR (default: every live pending tensor) with its fusion groups.

    ``fusion`` is a policy as for ``toychip.lazy(fusion=...)``; without it the clusters
    are the built-in scheduler's groups.
    """
    graph, groups = lazy_tensor.pending_schedule(tensors, fusion)
    view = GraphView(title="toychip lazy IR (pending)")
    _add_graph(view, graph, lambda n: "lazy_op" if n.op == "call_function" else n.op)
    for group in groups:
        if group.kind == "fused":
            view.add_cluster(group.name, f"{group.name}: {group.label}",
                             [n.name for n in group.nodes], kind="fusion")
    return view


# Planned materialisations versus barriers that cut a step into smaller graphs.
_PLANNED = {"mark_step", "exit", "explicit"}
register_kind("sync_planned", meaning="计划内的物化 (mark_step / 块结束)", fillcolor="#d9ead3")
register_kind("sync_barrier", meaning="同步屏障：把一步切成更小的图 (barrier)", fillcolor="#f4cccc")


def sync_timeline_view(metrics=None) -> GraphView:
    """Every graph lazy mode ran (default: since the last reset), left to right.

    Green: a planned ``mark_step`` / end of block; red: a barrier (``item``,
    ``host_copy``, ``print``, ``data_dependent_shape``, ``fallback``, ``eager_*``).
    """
    metrics = metrics or lazy_tensor.lazy_metrics()
    view = GraphView(title="lazy graphs executed, in order", direction="LR")
    previous = None
    for i, event in enumerate(metrics.sync_log):
        kind = "sync_planned" if event.reason in _PLANNED else "sync_barrier"
        details = [f"reason: {event.reason}", f"{event.nodes} ops"]
        if event.op:
            details.append(f"needed by {event.op}")
        view.add_node(f"graph_{i}", f"graph {i}", kind, details)
        if previous is not None:
            view.add_edge(previous, f"graph_{i}")
        previous = f"graph_{i}"
    return view
