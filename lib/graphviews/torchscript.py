"""TorchScript IR as views: one box per IR node, edges for value uses, blocks as frames.

Importing this module registers the adapter, so chapter 02 can ``show(scripted)``::

    import graphviews.torchscript
    show(torch.jit.script(model))      # also traced modules, script functions, torch.Graph

A ``prim::If`` / ``prim::Loop`` node is drawn inside a frame together with its blocks;
each block is a nested frame holding its parameters (``block params``), its nodes and
its return (``-> (...)``), whose edge into the control node shows the values it yields.
"""
from __future__ import annotations

import torch

from .adapters import to_view
from .model import GraphView
from .styles import NODE_STYLES, register_cluster_kind, register_kind

CONTROL_KINDS = ("prim::If", "prim::Loop")
INPUT, RETURN, BLOCK_PARAMS, BLOCK_RETURN = "ts_input", "ts_return", "ts_block_params", "ts_block_return"

register_kind(INPUT, fillcolor="#d9ead3")
register_kind(RETURN, fillcolor="#f4cccc")
register_kind(BLOCK_PARAMS, style="rounded,filled", fillcolor="#eef5e9")
register_kind(BLOCK_RETURN, fillcolor="#fbe5e5")
for _kind in CONTROL_KINDS:
    register_kind(_kind, shape="hexagon", fillcolor="#ffe599")
register_cluster_kind("ts_control", color="#bf9000", style="rounded,bold")
register_cluster_kind("ts_block", color="#888888", style="rounded,dashed")

# Styles per namespace, given to each IR kind the first time a view meets it.
_NAMESPACE_STYLES = {
    "aten": {"fillcolor": "#cfe2f3"},
    "prim": {"fillcolor": "#eeeeee"},
}
_OTHER_NAMESPACE_STYLE = {"fillcolor": "#d9d2e9"}


def _graph_of(obj) -> torch.Graph:
    if isinstance(obj, torch.Graph):
        return obj
    if isinstance(obj, (torch.jit.ScriptModule, torch.jit.ScriptFunction)):
        return obj.graph
    raise TypeError(f"expected a ScriptModule, ScriptFunction or torch.Graph, got {type(obj).__name__}")


def _style_kind(kind: str) -> str:
    if kind not in NODE_STYLES:
        register_kind(kind, **_NAMESPACE_STYLES.get(kind.split("::")[0], _OTHER_NAMESPACE_STYLE))
    return kind


def _value_text(value: torch.Value) -> str:
    return f"%{value.debugName()} : {value.type()}"


def _attribute_text(node: torch.Node) -> list[str]:
    """``name=...`` of GetAttr/CallMethod and the value of small constants."""
    details = []
    for name in node.attributeNames():
        if name == "value" and node.kindOf(name) == "t":
            details.append("value=<Tensor>")
        elif node.kindOf(name) in ("s", "i", "f", "ival"):
            text = str(getattr(node, node.kindOf(name))(name))
            details.append(f"{name}={text if len(text) <= 30 else text[:27] + '...'}")
    return details


class _Builder:
    """Walks a graph and its nested blocks, giving every IR node a view id."""

    def __init__(self, title: str, constants: bool):
        self.view = GraphView(title=title)
        self.constants = constants
        self.producer: dict[int, str] = {}  # Value.unique() → view node id
        self.count = 0

    def new_id(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}{self.count}"

    def define(self, view_id: str, values) -> None:
        for value in values:
            self.producer[value.unique()] = view_id

    def use(self, values, view_id: str) -> None:
        for value in values:
            source = self.producer.get(value.unique())
            if source is not None:
                self.view.add_edge(source, view_id, f"%{value.debugName()}")

    def block(self, block: torch.Block, label: str) -> list[str]:
        """Add a block's nodes; return the ids of everything drawn inside it."""
        members = []
        params = list(block.paramNode().outputs())
        if params:
            params_id = self.new_id("p")
            self.view.add_node(params_id, "block params", BLOCK_PARAMS, [_value_text(v) for v in params])
            self.define(params_id, params)
            members.append(params_id)
        for node in block.nodes():
            members.extend(self.node(node))
        returned = list(block.returnNode().inputs())
        return_id = self.new_id("r")
        self.view.add_node(return_id, f"-> ({len(returned)})" if label else "return",
                           BLOCK_RETURN if label else RETURN, [f"%{v.debugName()}" for v in returned])
        self.use(returned, return_id)
        members.append(return_id)
        return members

    def node(self, node: torch.Node) -> list[str]:
        kind = node.kind()
        if kind == "prim::Constant" and not self.constants:
            return []
        view_id = self.new_id("n")
        details = [_value_text(v) for v in node.outputs()] + _attribute_text(node)
        self.view.add_node(view_id, kind, _style_kind(kind), details)
        self.use(node.inputs(), view_id)
        members = [view_id]
        blocks = list(node.blocks())
        for index, block in enumerate(blocks):
            inner = self.block(block, f"block{index}")
            self.view.add_cluster(f"{view_id}.block{index}", f"block{index}", inner, kind="ts_block")
            self.view.add_edge(inner[-1], view_id, "yield")
            members.extend(inner)
        if blocks:
            self.view.add_cluster(view_id, kind, members, kind="ts_control")
        self.define(view_id, node.outputs())
        return members


def from_torchscript(obj, *, title: str = "", constants: bool = True) -> GraphView:
    """View of a TorchScript graph; ``constants=False`` hides ``prim::Constant`` nodes."""
    graph = _graph_of(obj)
    builder = _Builder(title, constants)
    for value in graph.inputs():
        input_id = builder.new_id("i")
        builder.view.add_node(input_id, f"%{value.debugName()}", INPUT, [str(value.type())])
        builder.define(input_id, [value])
    for node in graph.nodes():
        builder.node(node)
    returned = list(graph.outputs())
    return_id = builder.new_id("r")
    builder.view.add_node(return_id, "return", RETURN, [f"%{v.debugName()}" for v in returned])
    builder.use(returned, return_id)
    return builder.view


for _type in (torch.jit.ScriptModule, torch.jit.ScriptFunction, torch.Graph):
    to_view.register(_type, from_torchscript)
