"""One picture from a graph and its legend, sized for a notebook's output.

The legend is laid out as a small graph of its own: inside the graph, its rows would sit on
the graph's ranks, as far apart as the graph's. The two drawings are put together here, as
SVG (nested ``<svg>`` elements) or as a raster (Pillow). A drawing wider than a notebook's
output is scaled down to fit, but never so far that its labels become unreadable; what is
still too wide scrolls in a box whose scroll bars are on screen (:func:`scroll_box_html`).
"""
from __future__ import annotations

import base64
import html
import io
import re
from dataclasses import dataclass

from PIL import Image  # comes with matplotlib

TARGET_WIDTH_PT = 720  # about 960 px: a JupyterLab output beside the file browser
MIN_SCALE = 0.6  # 11 pt labels still about 9 px tall
GAP_PT = 12  # between a graph and its legend
PX_PER_PT = 96 / 72  # CSS pixels per point
UNTRUSTED_MAX_HEIGHT_PX = 720  # 80% of a 900 px window
LEGEND_ID_PREFIX = "legend_"

_ROOT = re.compile(r"<svg\b([^>]*)>(.*)</svg>\s*$", re.DOTALL)
_ATTRIBUTE = re.compile(r'([\w:-]+)="([^"]*)"')
_ID_REFERENCE = re.compile(r'(\bid="|\bhref="#|url\(#)')


@dataclass
class Placement:
    """Where a graph and its legend go on a canvas of ``size`` (same unit as their sizes)."""

    graph: tuple[float, float]
    legend: tuple[float, float]
    size: tuple[float, float]


def place(graph: tuple[float, float], legend: tuple[float, float], unit: float = 1.0) -> Placement:
    """The legend right of the graph when both fit the target width, else above it.

    Sizes are in ``unit`` per point: 1 for SVG, pixels per point for a raster, so a PNG is
    arranged like the SVG it matches.
    """
    (graph_width, graph_height), (legend_width, legend_height) = graph, legend
    gap = GAP_PT * unit
    if graph_width + gap + legend_width <= TARGET_WIDTH_PT * unit:
        return Placement((0, 0), (graph_width + gap, 0),
                         (graph_width + gap + legend_width, max(graph_height, legend_height)))
    return Placement((0, legend_height + gap), (0, 0),
                     (max(graph_width, legend_width), legend_height + gap + graph_height))


@dataclass
class SvgDrawing:
    """An SVG document as its root element's attributes and everything inside the root."""

    attributes: dict[str, str]
    body: str

    @classmethod
    def parse(cls, svg: str) -> SvgDrawing:
        root = _ROOT.search(svg)
        if root is None:
            raise ValueError("not an SVG document")
        return cls(dict(_ATTRIBUTE.findall(root.group(1))), root.group(2))

    @property
    def size(self) -> tuple[float, float]:
        """Width and height in points (Graphviz writes them as ``123pt``)."""
        return _points(self.attributes["width"]), _points(self.attributes["height"])

    def scaled(self, scale: float) -> SvgDrawing:
        """Shown ``scale`` times as large: a new width and height over the same viewBox."""
        width, height = self.size
        return SvgDrawing({**self.attributes, "width": f"{width * scale:.2f}pt",
                           "height": f"{height * scale:.2f}pt"}, self.body)

    def nested(self, x: float, y: float, id_prefix: str = "") -> str:
        """This drawing as an ``<svg>`` element at (x, y) of another; ids get ``id_prefix`` so two
        Graphviz drawings (both have ``graph0``, ``node1``, ...) can share one document."""
        width, height = self.size
        body = _ID_REFERENCE.sub(rf"\g<1>{id_prefix}", self.body) if id_prefix else self.body
        return (f'<svg x="{x:.2f}" y="{y:.2f}" width="{width:.2f}" height="{height:.2f}" '
                f'viewBox="{self.attributes["viewBox"]}">{body}</svg>')

    def to_svg(self) -> str:
        attributes = " ".join(f'{key}="{value}"' for key, value in self.attributes.items())
        return f'<?xml version="1.0" encoding="UTF-8" standalone="no"?>\n<svg {attributes}>{self.body}</svg>\n'


def _points(length: str) -> float:
    return float(length.removesuffix("pt"))


def compose_svg(graph: SvgDrawing, legend: SvgDrawing) -> SvgDrawing:
    """One drawing of the graph and its legend, placed by :func:`place` on a white canvas."""
    where = place(graph.size, legend.size)
    width, height = where.size
    body = "\n".join(['<rect width="100%" height="100%" fill="white"/>', graph.nested(*where.graph),
                      legend.nested(*where.legend, id_prefix=LEGEND_ID_PREFIX)])
    return SvgDrawing({"width": f"{width:.2f}pt", "height": f"{height:.2f}pt",
                       "viewBox": f"0 0 {width:.2f} {height:.2f}", "xmlns": "http://www.w3.org/2000/svg",
                       "xmlns:xlink": "http://www.w3.org/1999/xlink"}, f"\n{body}\n")


def fit_scale(width_pt: float) -> float:
    """How much to shrink a drawing so it fits the target width, never below ``MIN_SCALE``."""
    return max(MIN_SCALE, min(1.0, TARGET_WIDTH_PT / width_pt))


def fit_to_output(drawing: SvgDrawing) -> SvgDrawing:
    return drawing.scaled(fit_scale(drawing.size[0]))


def scroll_box_html(svg: str, alt: str) -> str:
    """``svg`` as an image at its own size, in a box that scrolls where the reader sees it.

    JupyterLab shows ``image/svg+xml`` as an ``<img>`` that no CSS rule fits to the output, so
    a wide graph overflows and its scroll bar sits under the whole graph. This box is at most
    the output's width and 80% of the window's height: both scroll bars are within one screen
    of the graph's top. The height in pixels comes first for untrusted outputs, whose HTML
    JupyterLab sanitizes, dropping ``vh``; ``max-width:none`` keeps JupyterLab from squeezing
    the image below ``MIN_SCALE``.
    """
    width, height = SvgDrawing.parse(svg).size
    data = base64.b64encode(svg.encode()).decode("ascii")
    return (f'<div style="max-width:100%; max-height:{UNTRUSTED_MAX_HEIGHT_PX}px; max-height:80vh; overflow:auto">'
            f'<img src="data:image/svg+xml;base64,{data}" alt="{html.escape(alt)}" '
            f'width="{round(width * PX_PER_PT)}" height="{round(height * PX_PER_PT)}" '
            'style="max-width:none"></div>')


def compose_raster(graph_png: bytes, legend_png: bytes, dpi: float, fmt: str) -> bytes:
    """A PNG, or a PDF holding one raster image, of the graph and its legend rendered at
    ``dpi``, placed as in the SVG."""
    images = [Image.open(io.BytesIO(png)).convert("RGBA") for png in (graph_png, legend_png)]
    where = place(images[0].size, images[1].size, unit=dpi / 72)
    canvas = Image.new("RGB", _pixels(where.size), "white")
    for image, corner in zip(images, (where.graph, where.legend)):
        canvas.paste(image, _pixels(corner), image)
    out = io.BytesIO()
    if fmt == "pdf":
        canvas.save(out, "PDF", resolution=dpi)
    else:
        canvas.save(out, "PNG", dpi=(dpi, dpi))
    return out.getvalue()


def _pixels(point: tuple[float, float]) -> tuple[int, int]:
    return round(point[0]), round(point[1])
