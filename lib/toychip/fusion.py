"""The scheduler: group the chip ops of a graph into kernels, fusing what can share a buffer.

Shared by the compiler (chapter 06) and the lazy executor (chapter 04). It walks an FX
graph of ATen ops in order and gives every node a :class:`KernelGroup`:

* a **pointwise tree** -- ``relu(mul(add(x, 1), 2))`` -- becomes one kernel when each
  inner node's value is used only inside the tree: one launch, no intermediate memory
  traffic (the code generator runs same-shape links in one buffer with ``out=``);
* a **matmul epilogue** -- ``relu(addmm(b, x, w))`` -- a tree may start at one matmul;
* views cost nothing (kind ``view``); every other op is a kernel of its own.

Loop form of a fused chain: ``for i: buf[i] = relu((x[i] + 1) * 2)``.

A *fusion policy* plugged into lazy mode (``toychip.lazy(fusion=...)``, chapter 04)
replaces the default grouping: inside ``with fixed_groups(groups):`` the scheduler fuses
exactly the given groups, after checking that each one can run as one kernel
(:func:`check_group`).
"""
from __future__ import annotations

import contextlib
import operator
from dataclasses import dataclass, field

import torch
import torch.fx as fx

from .op_table import GRAPH_TABLE


@dataclass(eq=False)  # identity semantics: groups are merged and removed by identity
class KernelGroup:
    """Nodes that run as one kernel launch (or, for ``view``, as no launch at all)."""

    name: str
    kind: str                                   # "fused", "single" or "view"
    nodes: list[fx.Node] = field(default_factory=list)
    # ``copy_(dst, root)`` write-backs done by this kernel after computing its root
    stores: list[fx.Node] = field(default_factory=list)

    @property
    def root(self) -> fx.Node:
        """The node whose value the kernel returns (its last member)."""
        return self.nodes[-1]

    @property
    def label(self) -> str:
        return " -> ".join(str(n.target).removeprefix("aten.").split(".")[0]
                           for n in self.nodes + self.stores)


class FusionError(ValueError):
    """A fusion group that cannot run as one kernel (the message says which rule it breaks)."""


def kind_of(target) -> str:
    """The kernel kind of an ATen op (``view`` for getitem on a multi-output kernel)."""
    if target is operator.getitem:
        return "view"
    return GRAPH_TABLE[target].kernel.kind


def node_kind(node: fx.Node) -> str:
    """The kernel kind of a call node."""
    return kind_of(node.target)


def _meta(node):
    return node.meta.get("val") if isinstance(node, fx.Node) else None


def _tree_members(node: fx.Node, open_group: dict) -> list["KernelGroup"]:
    """Open groups of ``node``'s producers whose values are used only inside the tree, and
    by no matmul there (a matmul reads its operands from memory)."""
    children = {p: open_group[p] for p in node.all_input_nodes if p in open_group}
    while True:
        inside = {node} | {n for g in children.values() for n in g.nodes}
        keep = {p: g for p, g in children.items()
                if isinstance(_meta(p), torch.Tensor) and set(p.users) <= inside
                and not any(node_kind(u) == "matmul" for u in p.users)}
        if keep.keys() == children.keys():
            return list(dict.fromkeys(keep.values()))
        children = keep


def _store_target(node: fx.Node, open_group: dict, position: dict):
    """For ``copy_(dst, src)``: the group that may do the write right after computing src.

    Safe when every other reader of ``dst`` runs no later than that group's root.
    """
    if node.target is not torch.ops.aten.copy_.default:
        return None
    dst, src = node.args[0], node.args[1]
    group = open_group.get(src)
    if group is None or not isinstance(dst, fx.Node):
        return None
    readers = [u for u in dst.users if u is not node]
    if all(position[u] <= position[group.root] for u in readers):
        return group
    return None


# Groups a plugged-in fusion policy chose for the graph being compiled (None: default).
_fixed: list[list[fx.Node]] | None = None


@contextlib.contextmanager
def fixed_groups(groups: list[list[fx.Node]]):
    """Inside the block, :func:`schedule` fuses exactly ``groups`` and nothing else."""
    global _fixed
    previous, _fixed = _fixed, groups
    try:
        yield
    finally:
        _fixed = previous


def check_group(members: list[fx.Node]) -> None:
    """Raise :class:`FusionError` unless ``members`` can run as one kernel.

    One kernel computes its members in order and returns only the last one (the root),
    so: pointwise members and at most one matmul, which reads its operands from memory
    (none may be computed in the same kernel), and no intermediate value may be needed
    outside the kernel (by another node or as a graph output).
    """
    repeated = sorted({n.name for n in members if members.count(n) > 1})
    if repeated:
        raise FusionError(f"{repeated} appear more than once in the group")
    kinds = [node_kind(n) if n.op == "call_function" else n.op for n in members]
    bad = [n.name for n, k in zip(members, kinds) if k not in ("pointwise", "matmul")]
    if bad:
        raise FusionError(f"only pointwise ops and one matmul can share a kernel, not {bad}")
    if kinds.count("matmul") > 1:
        raise FusionError("a kernel may contain at most one matmul")
    inside = set(members)
    for node, kind in zip(members, kinds):
        computed = [a.name for a in node.all_input_nodes if a in inside]
        if kind == "matmul" and computed:
            raise FusionError(f"the matmul {node.name} reads {computed}, computed in the same group: "
                              "a matmul reads its operands from memory")
    for node in members[:-1]:
        outside = [u.name for u in node.users if u not in inside]
        if outside:
            raise FusionError(f"{node.name} is also needed by {outside} outside the group, "
                              "so its value would have to be written to memory")


def _schedule_fixed(graph: fx.Graph, fixed: list[list[fx.Node]]) -> list[KernelGroup]:
    """Kernel groups for a policy's choice: each fixed group runs at its root's position."""
    position = {n: i for i, n in enumerate(graph.nodes)}
    group_of = {}
    for members in fixed:
        members = sorted(members, key=position.get)
        taken = [n.name for n in members if n in group_of]
        if taken:
            raise FusionError(f"{taken} already belong to another group")
        check_group(members)
        group = KernelGroup("kernel", "fused" if len(members) > 1 else "single", members)
        group_of.update(dict.fromkeys(members, group))
    groups = []
    for node in graph.nodes:
        if node.op != "call_function":
            continue
        if node_kind(node) == "view":
            groups.append(KernelGroup("view", "view", [node]))
        elif node not in group_of:
            groups.append(KernelGroup("kernel", "single", [node]))
        elif group_of[node].root is node:
            groups.append(group_of[node])
    return groups


def _name(groups: list[KernelGroup]) -> list[KernelGroup]:
    for i, group in enumerate(g for g in groups if g.kind != "view"):
        group.name = f"fused_{i}" if group.kind == "fused" else f"kernel_{i}"
    return groups


def schedule(graph: fx.Graph) -> list[KernelGroup]:
    """Assign every call_function node of ``graph`` to a kernel group, in execution order.

    A pointwise node absorbs the groups of its producers whose values only the tree uses
    (at most one matmul per tree): the tree runs as one kernel at its root's position.
    A ``copy_`` write-back of a kernel's result joins that kernel as a store. Inside
    :func:`fixed_groups`, a policy's groups replace these rules.
    """
    if _fixed is not None:
        return _name(_schedule_fixed(graph, _fixed))
    groups: list[KernelGroup] = []
    open_group: dict[fx.Node, KernelGroup] = {}  # root of a fusible tree -> its group
    position = {n: i for i, n in enumerate(graph.nodes)}
    for node in graph.nodes:
        if node.op != "call_function":
            continue
        kind = node_kind(node)
        if kind == "view":
            groups.append(KernelGroup("view", "view", [node]))
            continue
        store_group = _store_target(node, open_group, position)
        if store_group is not None:
            store_group.stores.append(node)
            store_group.kind = "fused"
            continue
        group = KernelGroup("kernel", "single")
        if kind == "pointwise":
            has_matmul = False
            for child in _tree_members(node, open_group):
                child_matmul = any(node_kind(n) == "matmul" for n in child.nodes)
                if child_matmul and has_matmul:
                    continue  # one matmul per kernel
                has_matmul |= child_matmul
                del open_group[child.root]
                groups.remove(child)
                group.nodes.extend(child.nodes)
            group.nodes.sort(key=position.get)
            if group.nodes:
                group.kind = "fused"
        group.nodes.append(node)
        groups.append(group)
        if kind in ("pointwise", "matmul") and _meta(node) is not None:
            open_group[node] = group
    return _name(groups)
