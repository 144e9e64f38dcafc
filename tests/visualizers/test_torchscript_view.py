"""TorchScript adapter: IR kinds as nodes, value uses as edges, nested blocks as clusters."""
import warnings

import pytest
import torch

import graphviews.torchscript  # noqa: F401  (registers the adapter)
from course_models.ch02_models import LOOP_WITH_BRANCH, BoolFlagModel, TensorFlagModel
from graphviews import show, to_dot, to_view
from graphviews.styles import NODE_STYLES


@pytest.fixture(autouse=True)
def quiet_jit_deprecations():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def loop_function():
    return torch.jit.CompilationUnit(LOOP_WITH_BRANCH).halve_or_shift


def by_label(view, label):
    return [node for node in view.nodes if node.label == label]


def test_every_ir_node_becomes_a_node_of_its_kind():
    view = to_view(torch.jit.script(BoolFlagModel()))
    kinds = [node.kind for node in view.nodes]
    assert kinds.count("prim::If") == 1 and kinds.count("aten::relu") == 1
    assert {"prim::GetAttr", "prim::CallMethod", "ts_input", "ts_return"} <= set(kinds)
    assert {"aten::relu", "prim::If"} <= set(NODE_STYLES)  # styled through register_kind


def test_edges_follow_value_uses_into_and_out_of_blocks():
    view = to_view(loop_function())
    relu, = by_label(view, "aten::relu")
    params, = by_label(view, "block params")
    if_node, = by_label(view, "prim::If")
    edges = {(e.src, e.dst, e.label) for e in view.edges}
    assert (params.id, relu.id, "%x.31") in edges            # loop-carried value used in the else block
    yields = [e.src for e in view.edges if e.dst == if_node.id and e.label == "yield"]
    assert len(yields) == 2                                  # one block return per branch


def test_blocks_nest_as_clusters_inside_their_control_node():
    view = to_view(loop_function())
    clusters = {c.label: c for c in view.clusters if c.kind == "ts_control"}
    loop, branch = set(clusters["prim::Loop"].node_ids), set(clusters["prim::If"].node_ids)
    assert branch < loop
    blocks = [set(c.node_ids) for c in view.clusters if c.kind == "ts_block"]
    assert len(blocks) == 3 and all(b < loop for b in blocks)
    assert to_dot(view).count("subgraph cluster_") == 5


def test_traced_modules_functions_and_raw_graphs_are_accepted():
    traced = torch.jit.trace(TensorFlagModel(), (torch.randn(2, 4), torch.tensor(True)), check_trace=False)
    assert not any(c.kind == "ts_control" for c in to_view(traced).clusters)  # the branch was baked in
    assert by_label(to_view(loop_function().graph), "prim::Loop")
    assert "aten::relu" in show(traced).text


def test_constants_can_be_hidden():
    shown = to_view(loop_function())
    hidden = to_view(loop_function(), constants=False)
    assert by_label(shown, "prim::Constant") and not by_label(hidden, "prim::Constant")


def test_other_objects_are_refused():
    with pytest.raises(TypeError):
        graphviews.torchscript.from_torchscript(torch.nn.Linear(2, 2))
