"""AOTAutograd views: the joint graph by direction, a partition by saved and recomputed values."""
import pytest
import torch
from functorch.compile import min_cut_rematerialization_partition

from course_models import ch06_models as models
from graphviews import show, to_dot
from graphviews.aot import BACKWARD, FORWARD, RECOMPUTED, SAVED, joint_view, partition_view, saved_values


def _graphs(partition_fn=None):
    torch.manual_seed(0)
    return models.capture_graphs(models.mlp_program(models.SEED_STEPS), models.mlp_inputs(4, 8, 2), partition_fn)


@pytest.fixture(scope="module")
def default_graphs():
    return _graphs()


def test_joint_view_colours_nodes_that_read_the_gradient_as_backward(default_graphs):
    view = joint_view(default_graphs["joint"])
    kinds = {node.id: node.kind for node in view.nodes}
    assert kinds["primals_1"] == kinds["tangents_1"] == "placeholder"
    assert kinds["mm"] == FORWARD and kinds["tanh_backward"] == BACKWARD
    assert {FORWARD, BACKWARD} <= set(kinds.values())


def test_partition_view_marks_saved_values_and_draws_them_across(default_graphs):
    forward, backward = default_graphs["forward"], default_graphs["backward"]
    view = partition_view(forward, backward)
    saved = [n for n in view.nodes if n.kind == SAVED]
    assert {n.label for n in saved} == set(saved_values(backward)) - {"primals_1", "primals_2", "primals_3"}
    assert all(any(line.endswith("bytes") for line in n.details) for n in saved)
    crossing = {(e.src, e.dst) for e in view.edges if e.label == "saved"}
    assert {src for src, _ in crossing} == {f"fw:{name}" for name in saved_values(backward)}
    assert all(src[3:] == dst[3:] for src, dst in crossing)
    assert [c.label for c in view.clusters] == ["forward graph", "backward graph"]
    assert "bytes" in view.title
    dot = to_dot(view)
    assert "cluster" in dot and "saved" in dot


def test_a_rematerializing_partition_shows_recomputed_nodes():
    graphs = _graphs(min_cut_rematerialization_partition)
    view = partition_view(graphs["forward"], graphs["backward"])
    assert any(n.kind == RECOMPUTED for n in view.nodes)
    assert show(view) is not None
