"""Turn a :class:`GraphView` into Graphviz source, SVG, or a plain-text fallback.

SVG comes from the first Graphviz engine that works (:mod:`.engines`: the system ``dot``, else
Graphviz compiled to WebAssembly). If none does, the view degrades to a text listing plus the
reason, so a notebook never stops on a drawing problem. Both carry a legend for the colours
and marks the view uses (:func:`graphviews.styles.legend_entries`): in the SVG, a small graph
of its own beside or above the graph (:mod:`.compose`).
"""
from __future__ import annotations

import unicodedata
from pathlib import Path

from .compose import SvgDrawing, compose_raster, compose_svg, fit_to_output, scroll_box_html
from .engines import DotOutput, find_dot, render_with
from .model import GraphView, ViewEdge
from .styles import STATUS_MARKS, LegendEntry, cluster_style, edge_style, legend_entries, node_style

__all__ = ["RenderedGraph", "find_dot", "legend_dot", "render", "to_dot", "to_text"]

LEGEND_TITLE = "图例 (legend)"
LEGEND_COLUMNS = 2
LEGEND_BOX = {"fontsize": "10", "height": "0.3", "margin": "0.08,0.03"}
# The legend graph's rows and columns: a little apart, nothing more (inches).
LEGEND_SPACING = "ranksep=0.12; nodesep=0.15;"

NODE_FONT_SIZE = "11"
NODE_MARGIN_X = 0.11  # inches: Graphviz's default margin on each side of a box's label
# Text widths in em for an engine without font metrics: CJK glyphs are square, other
# characters at most this wide in Helvetica.
WIDE_CHAR_EM, NARROW_CHAR_EM = 1.0, 0.6
# A PDF with a legend is composed from PNGs rendered at this resolution.
RASTER_DPI = {"png": 96, "pdf": 192}

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


def _is_wide(char: str) -> bool:
    return unicodedata.east_asian_width(char) in ("W", "F")


def _estimated_width(attrs: dict[str, str]) -> dict[str, str]:
    """A minimum ``width`` (inches) for a box whose label has East Asian wide characters.

    An engine without font metrics measures CJK text far too narrow and the text spills out
    of its box; this estimates it from the text instead. Nothing for other labels, whose
    estimate that engine already gets right.
    """
    label = attrs["label"]
    if not any(_is_wide(char) for char in label):
        return {}
    ems = max(sum(WIDE_CHAR_EM if _is_wide(char) else NARROW_CHAR_EM for char in line)
              for line in label.split("\n"))
    margin_x = float(attrs.get("margin", str(NODE_MARGIN_X)).split(",")[0])
    inches = ems * float(attrs.get("fontsize", NODE_FONT_SIZE)) / 72 + 2 * margin_x
    return {"width": f"{inches:.2f}"}


def _node_line(node_id: str, attrs: dict[str, str], estimate_text_width: bool) -> str:
    if estimate_text_width:
        attrs = {**attrs, **_estimated_width(attrs)}
    return f"{_quote(node_id)} [{_attrs(attrs)}];"


def _cluster_lines(view: GraphView, estimate_text_width: bool) -> list[str]:
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
                attrs = {"label": "\n".join([node.label, *node.details]), **node_style(node.kind, node.status)}
                out.append(pad + _node_line(node.id, attrs, estimate_text_width))
        return out

    return emit(None, 1)


def _edge_line(edge: ViewEdge) -> str:
    attrs = {"label": edge.label} if edge.label else {}
    attrs.update(edge_style(edge.status))
    if not edge.constrains_layout:
        attrs["constraint"] = "false"
    suffix = f" [{_attrs(attrs)}]" if attrs else ""
    return f"  {_quote(edge.src)} -> {_quote(edge.dst)}{suffix};"


def _graph_header(name: str, direction: str) -> list[str]:
    return [
        f"digraph {name} {{",
        f"  rankdir={direction};",
        '  fontname="Helvetica"; fontsize=12;',
        f'  node [fontname="Helvetica", fontsize={NODE_FONT_SIZE}];',
        '  edge [fontname="Helvetica", fontsize=9, color="#555555"];',
    ]


def to_dot(view: GraphView, *, estimate_text_width: bool = False) -> str:
    """Graphviz source of ``view``; clusters become ``subgraph cluster_*`` frames.

    The legend is a graph of its own (:func:`legend_dot`). ``estimate_text_width`` is for an
    engine without font metrics: boxes with CJK text get a width estimated from it.
    """
    lines = _graph_header("G", view.direction)
    if view.title:
        lines.append(f"  labelloc=t; label={_quote(view.title)};")
    lines.extend(_cluster_lines(view, estimate_text_width))
    lines.extend(_edge_line(edge) for edge in view.edges)
    lines.append("}")
    return "\n".join(lines)


def _legend_sample(entry: LegendEntry) -> dict[str, str]:
    """A legend box drawn the way the view draws what the entry explains."""
    if entry.part == "status":
        return node_style("", entry.key)
    if entry.part == "node":
        return node_style(entry.key, None)
    return {"shape": "box", **cluster_style(entry.key)}


def legend_dot(view: GraphView, *, estimate_text_width: bool = False) -> str | None:
    """Graphviz source of the legend, a framed graph of sample boxes LEGEND_COLUMNS to a row
    (invisible edges keep rows and columns in order); ``None`` when nothing needs explaining.

    A graph of its own, so its rows are as close as LEGEND_SPACING says (inside the view's
    graph they would sit on its ranks, far apart). Plain nodes, not an HTML-like label: the
    WebAssembly Graphviz is built without expat and would drop an HTML table.
    """
    entries = legend_entries(view)
    if not entries:
        return None
    ids = [f"__legend_{index}" for index in range(len(entries))]
    lines = [*_graph_header("legend", "TB"), f"  {LEGEND_SPACING}",
             "  subgraph cluster_legend {",
             f"    label={_quote(LEGEND_TITLE)}; fontsize=10; color=\"#bbbbbb\"; style=rounded;"]
    for node_id, entry in zip(ids, entries):
        attrs = {"label": entry.meaning, **LEGEND_BOX, **_legend_sample(entry)}
        lines.append("    " + _node_line(node_id, attrs, estimate_text_width))
    rows = [[_quote(node_id) for node_id in ids[start:start + LEGEND_COLUMNS]]
            for start in range(0, len(ids), LEGEND_COLUMNS)]
    lines.extend(f"    {{rank=same; {'; '.join(row)};}}" for row in rows)
    neighbours = [*(pair for row in rows for pair in zip(row, row[1:])),
                  *(pair for above, below in zip(rows, rows[1:]) for pair in zip(above, below))]
    lines.extend(f"    {first} -> {second} [style=invis];" for first, second in neighbours)
    lines.extend(["  }", "}"])
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
    ``dot_source`` and ``legend_source`` are the view's and its legend's Graphviz source (the
    legend's ``None`` when the view has none); ``svg`` draws both, scaled to a notebook's output.
    """

    def __init__(self, view: GraphView):
        self.view = view
        self.dot_source = to_dot(view)
        self.legend_source = legend_dot(view)
        output = render_with(self._draw_svg, "svg")
        self.svg = output.data.decode() if output.data is not None else None
        self.engine = output.engine
        self.problem = _fallback_reason(output) if output.problem else ""

    def _sources(self, engine) -> list[str]:
        """The graph's source, then the legend's if any, written for ``engine``."""
        estimate = not engine.measures_text
        sources = [to_dot(self.view, estimate_text_width=estimate), legend_dot(self.view, estimate_text_width=estimate)]
        return [source for source in sources if source is not None]

    def _draw_svg(self, engine) -> bytes:
        graph, *legend = (SvgDrawing.parse(engine.render(source, "svg").decode())
                          for source in self._sources(engine))
        drawing = compose_svg(graph, *legend) if legend else graph
        return fit_to_output(drawing).to_svg().encode()

    def _draw_raster(self, engine, fmt: str) -> bytes:
        """PNG or PDF straight from the engine; with a legend, composed from PNGs by Pillow
        (so such a PDF holds a RASTER_DPI["pdf"] image, not vector drawings)."""
        sources = self._sources(engine)
        if len(sources) == 1:
            return engine.render(sources[0], fmt)
        dpi = RASTER_DPI[fmt]
        graph, legend = (engine.render(_at_dpi(source, dpi), "png") for source in sources)
        return compose_raster(graph, legend, dpi, fmt)

    @property
    def text(self) -> str:
        return to_text(self.view)

    def _repr_mimebundle_(self, include=None, exclude=None):
        if self.svg is not None:
            # JupyterLab prefers text/html (a scroll box); the executed site, image/svg+xml.
            return {"text/html": scroll_box_html(self.svg, alt=self.view.title or "graph"),
                    "image/svg+xml": self.svg, "text/plain": self.text}
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
        """Write ``.svg``, ``.png``/``.pdf`` (system ``dot`` only), ``.dot``/``.gv`` (the graph's
        source, then the legend's: ``dot`` draws each) or ``.txt``."""
        path = Path(path)
        suffix = path.suffix.lower().lstrip(".")
        if suffix in ("dot", "gv"):
            path.write_text("\n".join(filter(None, [self.dot_source, self.legend_source])) + "\n", encoding="utf-8")
        elif suffix == "txt":
            path.write_text(self.text, encoding="utf-8")
        elif suffix == "svg" and self.svg is not None:
            path.write_text(self.svg, encoding="utf-8")
        elif suffix in ("svg", "png", "pdf"):
            draw = self._draw_svg if suffix == "svg" else lambda engine: self._draw_raster(engine, suffix)
            output = render_with(draw, suffix)
            if output.data is None:
                raise RuntimeError(f"无法写入 {path.name} (cannot write it): {output.problem} "
                                   f"{output.install_hint} {_SAVE_INSTEAD[suffix]}")
            path.write_bytes(output.data)
        else:
            raise ValueError(f"unsupported file type {path.suffix!r}: use .svg, .png, .pdf, .dot or .txt")
        return path


def _at_dpi(source: str, dpi: int) -> str:
    """``source`` with a ``dpi`` graph attribute, first thing after the graph's opening brace."""
    return source.replace("{", f"{{\n  dpi={dpi};", 1)


def render(view: GraphView) -> RenderedGraph:
    return RenderedGraph(view)
