"""AOTAutograd views: the joint graph by direction, a partition by saved and recomputed values."""
import re

import pytest
import torch
from functorch.compile import aot_function, default_partition, make_boxed_func, min_cut_rematerialization_partition

from course_models import ch06_models as models
from graphviews import engines, show, to_dot
from graphviews.aot import BACKWARD, FORWARD, RECOMPUTED, SAVED, joint_view, partition_view, saved_values
from svg_drawings import node_boxes, root_size


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


def _title_bytes(view) -> int:
    return int(re.search(r"(\d+) bytes", view.title).group(1))


def _detail_bytes(view) -> int:
    lines = [n.details[-1] for n in view.nodes if n.kind == SAVED]
    return sum(int(re.search(r"(\d+) bytes$", line).group(1)) for line in lines)


def _measured_saved_bytes(fn, inputs, partition_fn) -> int:
    """Chapter 06's rule on real tensors: the forward's outputs after the loss, by storage, inputs not counted."""
    saved = []

    def fw_compiler(gm, example_inputs):
        def run(args):
            outs = gm(*args)
            saved.extend(outs[1:])
            return outs
        run._boxed_call = True
        return run

    args = [t.detach().clone().requires_grad_() for t in inputs]
    aot_function(fn, fw_compiler, lambda gm, ex: make_boxed_func(gm.forward), partition_fn=partition_fn)(*args)
    inputs_storages = {a.untyped_storage().data_ptr() for a in args}
    storages = {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes() for t in saved}
    return sum(n for ptr, n in storages.items() if ptr not in inputs_storages)


@pytest.mark.parametrize("program", ["mlp", "glu"])
@pytest.mark.parametrize("partition_fn", [default_partition, min_cut_rematerialization_partition],
                         ids=["default", "min_cut"])
def test_partition_view_counts_saved_bytes_by_storage_without_the_inputs(program, partition_fn):
    torch.manual_seed(0)
    fn, inputs = ((models.mlp_program(models.SEED_STEPS), models.mlp_inputs(4, 8, 2)) if program == "mlp"
                  else (models.run_glu, models.glu_inputs(2, 4, 2)))
    graphs = models.capture_graphs(fn, inputs, partition_fn)
    view = partition_view(graphs["forward"], graphs["backward"])
    assert _title_bytes(view) == _detail_bytes(view) == _measured_saved_bytes(fn, inputs, partition_fn)


def test_partition_view_counts_an_alias_once_and_a_view_by_its_whole_storage():
    torch.manual_seed(0)
    glu = models.capture_graphs(models.run_glu, models.glu_inputs(2, 4, 2))
    details = {n.label: n.details[-1] for n in partition_view(glu["forward"], glu["backward"]).nodes if n.kind == SAVED}
    assert details["getitem"] == "whole storage: 64 bytes"      # half of a (2, 8) float32 matmul output
    assert details["detach"] == "sigmoid's storage: 0 bytes"
    assert details["t"] == "an input's storage: 0 bytes"


def test_a_rematerializing_partition_shows_recomputed_nodes():
    graphs = _graphs(min_cut_rematerialization_partition)
    view = partition_view(graphs["forward"], graphs["backward"])
    assert any(n.kind == RECOMPUTED for n in view.nodes)
    assert show(view) is not None


def test_partition_view_runs_top_to_bottom_with_the_graphs_side_by_side_and_stays_narrow(default_graphs):
    """Drawn left to right, chapter 06's seed partition was about 3700 × 1000 pt (its legend aside);
    top to bottom, about 1500 × 1650."""
    view = partition_view(default_graphs["forward"], default_graphs["backward"])
    saved = [edge for edge in view.edges if edge.label == "saved"]
    assert view.direction == "TB" and saved and not any(edge.constrains_layout for edge in saved)
    assert all(edge.constrains_layout for edge in view.edges if edge.label != "saved")
    svg = engines.render_dot(to_dot(view)).data.decode()
    boxes = node_boxes(svg)
    forward_right = max(right for name, (_, _, right, _) in boxes.items() if name.startswith("fw:"))
    assert forward_right < min(left for name, (left, _, _, _) in boxes.items() if name.startswith("bw:"))
    width, _ = root_size(svg)
    view.direction = "LR"
    for edge in saved:
        edge.constrains_layout = True
    left_to_right_width, _ = root_size(engines.render_dot(to_dot(view)).data.decode())
    assert width < 0.6 * left_to_right_width
