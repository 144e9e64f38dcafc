"""Does the scheduler fuse pointwise trees and matmul epilogues, and only those?"""
import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx

import toychip
from toychip.fusion import FusionError, check_group, schedule


def _groups(fn, *args):
    graph = make_fx(fn)(*args).graph
    return [(g.kind, g.label) for g in schedule(graph) if g.kind != "view"]


def test_pointwise_chain_is_one_kernel():
    groups = _groups(lambda x: torch.relu((x + 1) * 2), torch.randn(4, 4))
    assert groups == [("fused", "add -> mul -> relu")]


def test_matmul_epilogue_joins_the_matmul():
    groups = _groups(lambda x, w, b: torch.relu(torch.addmm(b, x, w)),
                     torch.randn(2, 3), torch.randn(3, 4), torch.randn(4))
    assert groups == [("fused", "addmm -> relu")]


def test_a_value_used_twice_outside_is_not_fused_away():
    def fn(x):
        y = x + 1
        return y * 2, y.sum()
    groups = _groups(fn, torch.randn(4))
    assert ("single", "add") in groups
    assert ("single", "sum") in groups


def test_reductions_stay_separate():
    groups = _groups(lambda x: (x * 2).sum() + 1, torch.randn(4))
    kinds = [label for _, label in groups]
    assert "sum" in kinds



def _relu_matmul_plus_relu(x, w):
    y = torch.relu(x)
    return y @ w + y


def test_a_matmul_reads_its_operands_from_memory():
    """relu's users (the matmul and the add) all end in one tree, yet relu runs first, on its own."""
    groups = _groups(_relu_matmul_plus_relu, torch.randn(4, 4), torch.randn(4, 4))
    assert groups == [("single", "relu"), ("fused", "mm -> add")]


def test_a_group_whose_matmul_reads_a_member_is_refused():
    graph = make_fx(_relu_matmul_plus_relu)(torch.randn(4, 4), torch.randn(4, 4)).graph
    with pytest.raises(FusionError, match="reads its operands from memory"):
        check_group([n for n in graph.nodes if n.op == "call_function"])


def test_lazy_mode_runs_a_matmul_whose_operand_is_also_read_after_it():
    x, w = torch.randn(4, 4), torch.randn(4, 4)
    with toychip.lazy():
        got = _relu_matmul_plus_relu(x.to("toychip"), w.to("toychip")).cpu()
    assert torch.allclose(got, _relu_matmul_plus_relu(x, w))


def test_a_group_that_names_a_node_twice_is_refused():
    graph = make_fx(lambda x: torch.relu(x + x))(torch.randn(4)).graph
    add, relu = [n for n in graph.nodes if n.op == "call_function"]
    with pytest.raises(FusionError, match="more than once"):
        check_group([add, add, relu])
