"""Turn a :class:`GraphView` into Graphviz source, SVG, or a plain-text fallback.

SVG comes from the first Graphviz engine that works (:mod:`.engines`: the system ``dot``, else
Graphviz compiled to WebAssembly). If none does, the view degrades to a text listing plus the
reason, so a notebook never stops on a drawing problem. Both carry a legend for the colours
and marks the view uses (:func:`graphviews.styles.legend_entries`).
"""
from __future__ import annotations

from pathlib import Path

from .engines import DotOutput, find_dot, render_dot
from .model import GraphView
from .styles import STATUS_MARKS, LegendEntry, cluster_style, edge_style, legend_entries, node_style

__all__ = ["RenderedGraph", "find_dot", "render", "to_dot", "to_text"]

LEGEND_TITLE = "图例 (legend)"
LEGEND_COLUMNS = 2
LEGEND_BOX = {"fontsize": "10", "height": "0.3", "margin": "0.08,0.03"}

# How the text view marks each part of a view; its legend uses the same marks.
TEXT_MARKS = {
    "status": lambda status: STATUS_MARKS.get(status, " "),
    "node": "[{}]".format,
    "cluster": "{{{}}}".format,
}


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _attrs(attrs: dict[str, str]) -> str:
    return ", ".join(f"{key}={_quote(value)}" for key, value in attrs.items())


def _cluster_parents(view: GraphView) -> list[int | None]:
    """Each cluster's parent: the smallest other cluster holding all its nodes (nesting)."""
    members = [set(c.node_ids) for c in view.clusters]
    parents: list[int | None] = []
    for index, inner in enumerate(members):
        holders = [j for j, outer in enumerate(members)
                   if j != index and inner <= outer and (inner != outer or j < index)]
        parents.append(min(holders, key=lambda j: len(members[j])) if holders else None)
    return parents


def _cluster_lines(view: GraphView) -> list[str]:
    """Node statements, each inside its innermost cluster; clusters nest by containment."""
    parents = _cluster_parents(view)
    home: dict[str, int] = {}
    for index in sorted(range(len(view.clusters)), key=lambda i: -len(view.clusters[i].node_ids)):
        for node_id in view.clusters[index].node_ids:
            home[node_id] = index  # smaller clusters come later and win

    def emit(parent: int | None, depth: int) -> list[str]:
        pad = "  " * depth
        out = []
        for index, cluster in enumerate(view.clusters):
            if parents[index] != parent:
                continue
            out.append(f"{pad}subgraph cluster_{index} {{")
            for key, value in {"label": cluster.label, **cluster_style(cluster.kind)}.items():
                out.append(f"{pad}  {key}={_quote(value)};")
            out.extend(emit(index, depth + 1))
            out.append(f"{pad}}}")
        for node in view.nodes:
            if home.get(node.id) == parent:
                label = "\n".join([node.label, *node.details])
                out.append(f"{pad}{_quote(node.id)} [{_attrs({'label': label, **node_style(node.kind, node.status)})}];")
        return out

    return emit(None, 1)


def _legend_sample(entry: LegendEntry) -> dict[str, str]:
    """A legend box drawn the way the view draws what the entry explains."""
    if entry.part == "status":
        return node_style("", entry.key)
    if entry.part == "node":
        return node_style(entry.key, None)
    return {"shape": "box", **cluster_style(entry.key)}


def _legend_lines(view: GraphView) -> list[str]:
    """A framed legend of sample boxes beside the graph, LEGEND_COLUMNS to a row so a long
    legend stays short; nothing when nothing needs explaining. Plain nodes, not an HTML-like
    label: the WebAssembly Graphviz is built without expat and would drop an HTML table."""
    entries = legend_entries(view)
    if not entries:
        return []
    ids = [_quote(f"__legend_{index}") for index in range(len(entries))]
    lines = ["  subgraph cluster_legend {",
             f"    label={_quote(LEGEND_TITLE)}; fontsize=10; color=\"#bbbbbb\"; style=rounded;"]
    for node_id, entry in zip(ids, entries):
        attrs = {"label": entry.meaning, **LEGEND_BOX, **_legend_sample(entry)}
        lines.append(f"    {node_id} [{_attrs(attrs)}];")
    rows = [ids[start:start + LEGEND_COLUMNS] for start in range(0, len(ids), LEGEND_COLUMNS)]
    lines.extend(f"    {{rank=same; {'; '.join(row)};}}" for row in rows)
    lines.extend(f"    {above[0]} -> {below[0]} [style=invis];" for above, below in zip(rows, rows[1:]))
    lines.append("  }")
    return lines


def to_dot(view: GraphView) -> str:
    """Graphviz source of ``view``; clusters become ``subgraph cluster_*`` frames."""
    lines = [
        "digraph G {",
        f"  rankdir={view.direction};",
        '  fontname="Helvetica"; fontsize=12;',
        '  node [fontname="Helvetica", fontsize=11];',
        '  edge [fontname="Helvetica", fontsize=9, color="#555555"];',
    ]
    if view.title:
        lines.append(f"  labelloc=t; label={_quote(view.title)};")
    lines.extend(_cluster_lines(view))
    for edge in view.edges:
        attrs = {"label": edge.label} if edge.label else {}
        attrs.update(edge_style(edge.status))
        suffix = f" [{_attrs(attrs)}]" if attrs else ""
        lines.append(f"  {_quote(edge.src)} -> {_quote(edge.dst)}{suffix};")
    lines.extend(_legend_lines(view))
    lines.append("}")
    return "\n".join(lines)


def _legend_text(view: GraphView) -> list[str]:
    """The legend as text: one line per entry, led by the mark the listing uses for it."""
    entries = legend_entries(view)
    if not entries:
        return []
    return [f"{LEGEND_TITLE}:", *(f"  {TEXT_MARKS[e.part](e.key)} {e.meaning}" for e in entries)]


def to_text(view: GraphView) -> str:
    """A readable listing: one line per node with its inputs, then the clusters and the legend."""
    inputs: dict[str, list[str]] = {}
    for edge in view.edges:
        inputs.setdefault(edge.dst, []).append(TEXT_MARKS["status"](edge.status).strip() + edge.src)
    lines = [view.title] if view.title else []
    for node in view.nodes:
        mark = TEXT_MARKS["status"](node.status)
        sources = inputs.get(node.id)
        arrow = f"  <- {', '.join(sources)}" if sources else ""
        details = f"  ({'; '.join(node.details)})" if node.details else ""
        lines.append(f"{mark} {TEXT_MARKS['node'](node.kind)} {node.label}{details}{arrow}")
    for cluster in view.clusters:
        lines.append(f"  {TEXT_MARKS['cluster'](cluster.kind)} {cluster.label}: {', '.join(cluster.node_ids)}")
    lines.extend(_legend_text(view))
    return "\n".join(lines)


INSTALL_HINT_GIVEN = "（安装方法见本会话第一个文本视图下的提示 / install steps: see the first text view）"
# Whether this process (a notebook's kernel session) has already shown the install instructions.
_install_hint_shown = False


def _fallback_reason(output: DotOutput) -> str:
    """Why a graph is text: with the install instructions the first time in a kernel session,
    then the reason alone, so a chapter full of graphs does not repeat them under each one."""
    global _install_hint_shown
    if not output.install_hint:
        return f"已改用文本视图：{output.problem}"
    if _install_hint_shown:
        return f"已改用文本视图：{output.problem}{INSTALL_HINT_GIVEN}"
    _install_hint_shown = True
    return f"已改用文本视图：{output.problem} {output.install_hint}"


_SAVE_INSTEAD = {  # what still works when a format cannot be written
    "svg": "Save as .dot or .txt instead.",
    "png": "PNG needs the system Graphviz dot; save as .svg instead (works without it), or .dot/.txt.",
    "pdf": "PDF needs the system Graphviz dot; save as .svg instead (works without it), or .dot/.txt.",
}


class RenderedGraph:
    """What notebooks display: SVG when a Graphviz engine works, otherwise text plus the reason.

    ``engine`` names the engine that drew the SVG (``"dot"`` or ``"wasm"``), ``None`` for text.
    """

    def __init__(self, view: GraphView):
        self.view = view
        self.dot_source = to_dot(view)
        output = render_dot(self.dot_source, "svg")
        self.svg = output.data.decode() if output.data is not None else None
        self.engine = output.engine
        self.problem = _fallback_reason(output) if output.problem else ""

    @property
    def text(self) -> str:
        return to_text(self.view)

    def _repr_mimebundle_(self, include=None, exclude=None):
        if self.svg is not None:
            return {"image/svg+xml": self.svg, "text/plain": self.text}
        import html

        body = html.escape(self.text)
        hint = html.escape(self.problem)
        return {
            "text/html": f"<pre>{body}</pre><p><em>{hint}</em></p>",
            "text/plain": f"{self.text}\n{self.problem}",
        }

    def __repr__(self) -> str:
        return self.text

    def save(self, path) -> Path:
        """Write ``.svg``, ``.png``/``.pdf`` (system ``dot`` only), ``.dot``/``.gv`` or ``.txt``."""
        path = Path(path)
        suffix = path.suffix.lower().lstrip(".")
        if suffix in ("dot", "gv"):
            path.write_text(self.dot_source, encoding="utf-8")
        elif suffix == "txt":
            path.write_text(self.text, encoding="utf-8")
        elif suffix == "svg" and self.svg is not None:
            path.write_text(self.svg, encoding="utf-8")
        elif suffix in ("svg", "png", "pdf"):
            output = render_dot(self.dot_source, suffix)
            if output.data is None:
                raise RuntimeError(f"无法写入 {path.name} (cannot write it): {output.problem} "
                                   f"{output.install_hint} {_SAVE_INSTEAD[suffix]}")
            path.write_bytes(output.data)
        else:
            raise ValueError(f"unsupported file type {path.suffix!r}: use .svg, .png, .pdf, .dot or .txt")
        return path


def render(view: GraphView) -> RenderedGraph:
    return RenderedGraph(view)
