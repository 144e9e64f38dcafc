"""AOTAutograd graphs as views: the joint graph split into forward and backward, and a
partition with the values it saves and the ones the backward recomputes (chapter 06).

    from graphviews import show
    from graphviews.aot import joint_view, partition_view
    show(joint_view(joint))                  # blue: forward, orange: backward
    show(partition_view(forward, backward))  # saved values cross from one graph to the other

A node belongs to the backward if it depends on a ``tangents_*`` input (the incoming
gradient); a backward-graph node that does not is a recomputation of forward values
(or a view of a saved one), which is what a rematerialising partitioner adds.

Saved bytes are counted as chapter 06 measures memory: by storage. A saved view keeps its
whole storage alive, an alias (``detach``) of a value already counted adds nothing, and
the inputs' storages are in memory anyway.
"""
from __future__ import annotations

import torch.fx
from torch.multiprocessing.reductions import StorageWeakRef

from .fx import node_details
from .model import GraphView
from .styles import register_cluster_kind, register_kind

FORWARD, BACKWARD, SAVED, RECOMPUTED = "aot_forward", "aot_backward", "aot_saved", "aot_recomputed"

register_kind(FORWARD, meaning="前向 (forward)", fillcolor="#cfe2f3")
register_kind(BACKWARD, meaning="反向 (backward)", fillcolor="#fce5cd")
register_kind(SAVED, meaning="保存给反向的值 (saved for backward)", fillcolor="#fff2cc", color="#b45f06",
              penwidth="2.5")
register_kind(RECOMPUTED, meaning="反向里重算 (recomputed)", fillcolor="#d9ead3", color="#38761d",
              penwidth="2", style="filled,dashed")
register_cluster_kind("aot_graph", color="#666666", style="rounded")


def is_tangent(node: torch.fx.Node) -> bool:
    return node.op == "placeholder" and node.name.startswith("tangents")


def tangent_dependent(graph: torch.fx.Graph) -> set[torch.fx.Node]:
    """Nodes that read an incoming gradient, directly or through other nodes."""
    found: set[torch.fx.Node] = set()
    for node in graph.nodes:
        if is_tangent(node) or any(a in found for a in node.all_input_nodes):
            found.add(node)
    return found


def saved_storage_bytes(forward, saved) -> tuple[dict[str, str], int]:
    """What each saved forward value adds to memory, as a detail line, and the total.

    The first saved value on a storage counts the whole storage; later ones on the same
    storage, and values on an input's storage, add 0 bytes.
    """
    graph = _graph(forward)
    inputs = {ref for n in graph.nodes if n.op == "placeholder" and (ref := _storage(n)) is not None}
    counted: dict[StorageWeakRef, str] = {}
    lines, total = {}, 0
    for node in graph.nodes:
        ref = _storage(node)
        if node.name not in saved or node.op == "placeholder" or ref is None:
            continue
        if ref in inputs:
            lines[node.name] = "an input's storage: 0 bytes"
        elif ref in counted:
            lines[node.name] = f"{counted[ref]}'s storage: 0 bytes"
        else:
            counted[ref] = node.name
            nbytes = node.meta["val"].untyped_storage().nbytes()
            whole = nbytes > node.meta["val"].numel() * node.meta["val"].element_size()
            lines[node.name] = f"whole storage: {nbytes} bytes" if whole else f"{nbytes} bytes"
            total += nbytes
    return lines, total


def _storage(node: torch.fx.Node) -> StorageWeakRef | None:
    value = node.meta.get("val")
    return StorageWeakRef(value.untyped_storage()) if isinstance(value, torch.Tensor) else None


def _graph(obj) -> torch.fx.Graph:
    return obj.graph if isinstance(obj, torch.fx.GraphModule) else obj


def joint_view(joint, *, title: str = "joint graph") -> GraphView:
    """The joint forward+backward graph: forward nodes blue, backward nodes orange."""
    graph = _graph(joint)
    backward = tangent_dependent(graph)
    view = GraphView(title=title)
    for node in graph.nodes:
        kind = node.op if node.op in ("placeholder", "output") else (BACKWARD if node in backward else FORWARD)
        view.add_node(node.name, node.name, kind, node_details(node))
        for source in node.all_input_nodes:
            view.add_edge(source.name, node.name)
    return view


def saved_values(backward) -> list[str]:
    """Names of what the forward hands to the backward (the backward's non-tangent inputs)."""
    return [n.name for n in _graph(backward).nodes if n.op == "placeholder" and not is_tangent(n)]


def partition_view(forward, backward, *, title: str = "") -> GraphView:
    """Forward and backward graphs side by side; saved values cross over, recomputations are green.

    Each graph runs top to bottom; the "saved" edges do not rank the backward below the
    forward (drawn left to right, the two chains made a picture several screens wide).
    """
    fw_graph, bw_graph = _graph(forward), _graph(backward)
    saved = set(saved_values(bw_graph))
    saved_bytes, total = saved_storage_bytes(fw_graph, saved)
    view = GraphView(title=title or f"saved for backward: {len(saved)} values, {total} bytes "
                                    f"(by storage, inputs not counted)")
    for prefix, graph in (("fw", fw_graph), ("bw", bw_graph)):
        grad_nodes = tangent_dependent(graph)
        ids = []
        for node in graph.nodes:
            if prefix == "fw":
                kind = SAVED if node.name in saved and node.op != "placeholder" else \
                    node.op if node.op in ("placeholder", "output") else FORWARD
            elif node.op in ("placeholder", "output"):
                kind = node.op
            else:
                kind = BACKWARD if node in grad_nodes else RECOMPUTED
            details = node_details(node)
            if kind == SAVED and node.name in saved_bytes:
                details.append(saved_bytes[node.name])
            view.add_node(f"{prefix}:{node.name}", node.name, kind, details)
            ids.append(f"{prefix}:{node.name}")
            for source in node.all_input_nodes:
                view.add_edge(f"{prefix}:{source.name}", f"{prefix}:{node.name}")
        view.add_cluster(prefix, "forward graph" if prefix == "fw" else "backward graph", ids, kind="aot_graph")
    fw_names = {n.name for n in fw_graph.nodes}
    for name in sorted(saved):
        if name in fw_names:
            view.add_edge(f"fw:{name}", f"bw:{name}", label="saved", constrains_layout=False)
    return view
