"""Reading back what Graphviz drew: node boxes and the size an SVG is shown at."""
import re

_NODE = re.compile(r'<g id="([^"]*)" class="node">\s*<title>([^<]*)</title>\s*<polygon[^>]*points="([^"]*)"')


def node_boxes(svg: str) -> dict[str, tuple[float, float, float, float]]:
    """Each box-shaped node's (left, top, right, bottom) in its own drawing's coordinates, by
    the node's DOT id (Graphviz writes it as the node's title)."""
    boxes = {}
    for _, title, points in _NODE.findall(svg):
        xs, ys = zip(*(map(float, point.split(",")) for point in points.split()))
        boxes[title] = (min(xs), min(ys), max(xs), max(ys))
    return boxes


def box_width(box: tuple[float, float, float, float]) -> float:
    return box[2] - box[0]


def root_size(svg: str) -> tuple[float, float]:
    """The width and height the SVG is shown at, in points."""
    root = re.search(r"<svg\b[^>]*>", svg).group(0)
    return tuple(float(re.search(rf'\b{name}="([\d.]+)pt"', root).group(1)) for name in ("width", "height"))


def nested_drawings(svg: str) -> list[str]:
    """The ``<svg ...>`` start tags of the drawings a composed SVG holds (graph, then legend)."""
    return re.findall(r"<svg x=[^>]*>", svg)


def shown_scale(svg: str) -> float:
    """How much larger than its viewBox's points the SVG is shown (1: its natural size)."""
    root = re.search(r"<svg\b[^>]*>", svg).group(0)
    view_width = float(re.search(r'viewBox="[-\d.]+ [-\d.]+ ([\d.]+)', root).group(1))
    return root_size(svg)[0] / view_width
