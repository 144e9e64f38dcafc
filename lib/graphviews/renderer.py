"""Turn a :class:`GraphView` into Graphviz source, SVG, or a plain-text fallback.

SVG needs the ``dot`` binary. Without it (or if it fails) the view degrades to a text
listing plus one installation hint, so a notebook never stops on a missing tool.
"""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from .model import GraphView
from .styles import STATUS_MARKS, cluster_style, node_style

INSTALL_HINT = (
    "未找到 Graphviz 的 dot 程序，已改用文本视图。安装方法 (install Graphviz): "
    "conda install -c conda-forge graphviz | sudo apt-get install graphviz | brew install graphviz"
)
DOT_TIMEOUT_S = 60


def find_dot() -> str | None:
    """Path of the ``dot`` binary, looked up on every call so PATH changes apply."""
    return shutil.which("dot")


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
        if edge.status == "removed":
            attrs.update(style="dashed", color="#c62828")
        elif edge.status == "added":
            attrs.update(color="#2e7d32")
        suffix = f" [{_attrs(attrs)}]" if attrs else ""
        lines.append(f"  {_quote(edge.src)} -> {_quote(edge.dst)}{suffix};")
    lines.append("}")
    return "\n".join(lines)


def to_text(view: GraphView) -> str:
    """A readable listing: one line per node with its inputs, then the clusters."""
    inputs: dict[str, list[str]] = {}
    for edge in view.edges:
        inputs.setdefault(edge.dst, []).append(STATUS_MARKS[edge.status].strip() + edge.src)
    lines = [view.title] if view.title else []
    for node in view.nodes:
        mark = STATUS_MARKS.get(node.status, " ")
        sources = inputs.get(node.id)
        arrow = f"  <- {', '.join(sources)}" if sources else ""
        details = f"  ({'; '.join(node.details)})" if node.details else ""
        lines.append(f"{mark} [{node.kind}] {node.label}{details}{arrow}")
    for cluster in view.clusters:
        lines.append(f"  {{{cluster.kind}}} {cluster.label}: {', '.join(cluster.node_ids)}")
    return "\n".join(lines)


def _run_dot(source: str, fmt: str) -> tuple[bytes | None, str]:
    """Run ``dot``; returns (output, "") or (None, reason)."""
    dot = find_dot()
    if dot is None:
        return None, INSTALL_HINT
    try:
        done = subprocess.run([dot, f"-T{fmt}"], input=source.encode(), capture_output=True,
                              timeout=DOT_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as error:
        return None, f"Graphviz dot 运行失败 ({error})，已改用文本视图。"
    if done.returncode != 0:
        first_line = done.stderr.decode(errors="replace").strip().splitlines()[:1]
        return None, f"Graphviz dot 运行失败 ({' '.join(first_line)})，已改用文本视图。"
    return done.stdout, ""


class RenderedGraph:
    """What notebooks display: SVG when Graphviz works, otherwise text plus a hint."""

    def __init__(self, view: GraphView):
        self.view = view
        self.dot_source = to_dot(view)
        svg, self.problem = _run_dot(self.dot_source, "svg")
        self.svg = svg.decode() if svg is not None else None

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
        """Write ``.svg``/``.png``/``.pdf`` (needs Graphviz), ``.dot``/``.gv`` or ``.txt``."""
        path = Path(path)
        suffix = path.suffix.lower().lstrip(".")
        if suffix in ("dot", "gv"):
            path.write_text(self.dot_source, encoding="utf-8")
        elif suffix == "txt":
            path.write_text(self.text, encoding="utf-8")
        elif suffix == "svg" and self.svg is not None:
            path.write_text(self.svg, encoding="utf-8")
        elif suffix in ("svg", "png", "pdf"):
            data, problem = _run_dot(self.dot_source, suffix)
            if data is None:
                raise RuntimeError(f"cannot write {path.name}: {problem} "
                                   "Save as .dot or .txt instead.")
            path.write_bytes(data)
        else:
            raise ValueError(f"unsupported file type {path.suffix!r}: use .svg, .png, .pdf, .dot or .txt")
        return path


def render(view: GraphView) -> RenderedGraph:
    return RenderedGraph(view)
