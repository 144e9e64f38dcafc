"""Dynamo adapter: each captured graph in its own frame, graph breaks between them."""
import re

import pytest
import torch

import graphviews.dynamo  # noqa: F401  (registers the adapter)
from course_models.ch01_models import running_stats
from graphviews import show, to_dot, to_view
from graphviews.dynamo import GRAPH_BREAK, from_graphs
from graphviews.styles import NODE_STYLES


@pytest.fixture(scope="module")
def explained():
    torch._dynamo.reset()
    return torch._dynamo.explain(running_stats)(torch.randn(8))


def test_every_graph_is_a_frame_holding_its_own_nodes(explained):
    view = to_view(explained)
    frames = [c for c in view.clusters if c.kind == "dynamo_graph"]
    assert len(frames) == explained.graph_count == 3
    for index, (frame, gm) in enumerate(zip(frames, explained.graphs)):
        assert frame.node_ids == [f"g{index}.{node.name}" for node in gm.graph.nodes]
    assert "3 graph(s), 2 graph break(s)" in view.title


def test_breaks_sit_between_the_graphs_and_say_where(explained):
    view = to_view(explained)
    breaks = [n for n in view.nodes if n.kind == GRAPH_BREAK]
    assert [b.label for b in breaks] == ["graph break 1", "graph break 2"]
    assert any("ch01_models.py" in line for line in breaks[0].details)
    assert any("print" in line for line in breaks[0].details)
    edges = {(e.src, e.dst) for e in view.edges}
    assert ("g0.output", "break0") in edges and ("break1", view.clusters[2].node_ids[0]) in edges
    assert GRAPH_BREAK in NODE_STYLES


def test_graphs_without_breaks_and_rendering():
    def double(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    graphs = []
    torch._dynamo.reset()
    torch.compile(lambda x: torch.relu(x) * 2, backend=double)(torch.randn(3))
    view = from_graphs(graphs, title="one graph")
    assert not [n for n in view.nodes if n.kind == GRAPH_BREAK]
    assert len(re.findall(r"subgraph cluster_\d+ ", to_dot(view))) == 1  # the legend is not a frame
    assert "relu" in show(view).text
