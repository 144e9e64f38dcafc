"""The renderer-independent graph model every visualizer builds.

Adapters turn a domain object (an FX graph, a lazy IR, a dispatch trace, ...) into a
:class:`GraphView`; :mod:`graphviews.renderer` turns a view into SVG or text. Keeping the
model plain data means a new chapter adds an adapter, never a new renderer.
"""
from __future__ import annotations

from dataclasses import dataclass, field

# Status of a node in a before/after diff; ``None`` means unchanged.
DIFF_STATUSES = ("added", "removed", "changed")


@dataclass
class ViewNode:
    """One box: ``label`` is the headline, ``details`` the smaller lines under it.

    ``kind`` selects the style (see :mod:`graphviews.styles`): FX opcodes, or any
    kind a later adapter registers.
    """

    id: str
    label: str
    kind: str
    details: list[str] = field(default_factory=list)
    status: str | None = None


@dataclass
class ViewEdge:
    """A data or control dependency from ``src`` to ``dst``.

    ``constrains_layout=False`` draws the edge without letting it rank ``dst`` below ``src``:
    for a cross-link between two graphs drawn side by side.
    """

    src: str
    dst: str
    label: str = ""
    status: str | None = None
    constrains_layout: bool = True


@dataclass
class ViewCluster:
    """A named group of nodes drawn inside one frame (partition, fusion group, block)."""

    name: str
    label: str
    node_ids: list[str]
    kind: str = "group"


@dataclass
class GraphView:
    """Nodes, edges and clusters, in the order they should be laid out."""

    title: str = ""
    nodes: list[ViewNode] = field(default_factory=list)
    edges: list[ViewEdge] = field(default_factory=list)
    clusters: list[ViewCluster] = field(default_factory=list)
    direction: str = "TB"

    def add_node(self, id: str, label: str, kind: str, details=(), status=None) -> ViewNode:
        node = ViewNode(id, label, kind, list(details), status)
        self.nodes.append(node)
        return node

    def add_edge(self, src: str, dst: str, label: str = "", status=None, *,
                 constrains_layout: bool = True) -> ViewEdge:
        edge = ViewEdge(src, dst, label, status, constrains_layout)
        self.edges.append(edge)
        return edge

    def add_cluster(self, name: str, label: str, node_ids, kind: str = "group") -> ViewCluster:
        cluster = ViewCluster(name, label, list(node_ids), kind)
        self.clusters.append(cluster)
        return cluster

    def node(self, id: str) -> ViewNode:
        for node in self.nodes:
            if node.id == id:
                return node
        raise KeyError(id)
