"""Does the scheduler fuse pointwise trees and matmul epilogues, and only those?"""
import torch
from torch.fx.experimental.proxy_tensor import make_fx

from toychip.fusion import schedule


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

