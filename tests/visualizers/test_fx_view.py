"""FX adapter: node kinds, shape metadata, groups as clusters, and pass diffs."""
import copy

import torch
import torch.fx as fx
import torch.nn.functional as F
from torch.fx.passes.shape_prop import ShapeProp

from course_models.ch03_models import ModelWithDropout
from graphviews import diff_fx, from_fx


def traced_dropout_model():
    gm = fx.symbolic_trace(ModelWithDropout().eval())
    ShapeProp(gm).propagate(torch.randn(2, 10))
    return gm


def test_nodes_carry_opcode_kind_module_class_and_shape():
    view = from_fx(traced_dropout_model())
    kinds = {node.id: node.kind for node in view.nodes}
    assert kinds["x"] == "placeholder" and kinds["linear1"] == "call_module" and kinds["output"] == "output"
    assert kinds["dropout_1"] == "call_function"
    assert view.node("linear1").details == ["linear1: Linear", "(2, 20) float32"]
    assert ("x", "linear1") in {(e.src, e.dst) for e in view.edges}


def test_groups_become_clusters_of_node_names():
    gm = traced_dropout_model()
    nodes = [n for n in gm.graph.nodes if n.op == "call_module"][:2]
    view = from_fx(gm, groups={"g0": nodes}, group_kind="fusion")
    assert [(c.label, c.node_ids, c.kind) for c in view.clusters] == [("g0", ["linear1", "dropout"], "fusion")]


def test_diff_marks_added_changed_and_removed_nodes():
    before = traced_dropout_model()
    after = copy.deepcopy(before)
    graph = after.graph
    for node in list(graph.nodes):
        if node.op == "call_module" and node.target == "dropout":
            node.replace_all_uses_with(node.args[0])
            graph.erase_node(node)
        elif node.op == "call_function":
            node.target = F.gelu
    with graph.inserting_before(next(n for n in graph.nodes if n.op == "output")):
        graph.call_function(torch.neg, (next(iter(graph.nodes)),))
    after.recompile()
    status = {node.id: node.status for node in diff_fx(before, after).nodes}
    assert status["dropout"] == "removed"
    assert status["dropout_1"] == "changed"
    assert status["neg"] == "added"
    assert status["linear2"] is None  # same target, same input name
    assert status["x"] is None


def test_diff_marks_a_module_whose_weights_were_replaced():
    before = traced_dropout_model()
    after = copy.deepcopy(before)
    with torch.no_grad():
        after.linear2.weight.mul_(2)
    status = {node.id: node.status for node in diff_fx(before, after).nodes}
    assert status["linear2"] == "changed" and status["linear1"] is None
