"""Do the graph modes build GELU from chip kernels, while eager mode still falls back?

Eager GELU stays a CPU fallback on purpose: chapter 07's exercise is to add its kernel.
"""
import pytest
import torch
import torch.nn.functional as F
from torch.fx.experimental.proxy_tensor import make_fx

import toychip
from toychip import compiler
from toychip.decompositions import GRAPH_DECOMPOSITIONS
from toychip.op_table import GRAPH_TABLE

APPROXIMATIONS = ("none", "tanh")


def _example_args(op):
    x, grad = torch.randn(3, 4), torch.randn(3, 4)
    return (grad, x) if "backward" in str(op) else (x,)


@pytest.mark.parametrize("approximate", APPROXIMATIONS)
@pytest.mark.parametrize("op", GRAPH_DECOMPOSITIONS, ids=str)
def test_every_graph_decomposition_lands_on_chip_kernels(op, approximate):
    traced = make_fx(lambda *a: op(*a, approximate=approximate),
                     decomposition_table=GRAPH_DECOMPOSITIONS)(*_example_args(op))
    targets = {n.target for n in traced.graph.nodes if n.op == "call_function"}
    assert targets and targets <= set(GRAPH_TABLE), targets - set(GRAPH_TABLE)


def _gelu_grads(x, approximate, gelu=F.gelu):
    x = x.detach().requires_grad_()
    out = gelu(x, approximate=approximate)
    out.backward(torch.ones_like(out))
    return out, x.grad


@pytest.mark.parametrize("approximate", APPROXIMATIONS)
def test_lazy_gelu_is_recorded_as_chip_ops_and_matches_cpu(approximate):
    x = torch.randn(4, 6) * 3
    want, want_grad = _gelu_grads(x, approximate)
    toychip.reset_lazy_metrics()
    with toychip.strict(), toychip.lazy():
        out, grad = _gelu_grads(x.to("toychip"), approximate)
    assert toychip.lazy_metrics().graphs_executed == 1
    torch.testing.assert_close(out.cpu(), want, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(grad.cpu(), want_grad, rtol=1e-5, atol=1e-6)


def test_compiled_gelu_is_one_fused_kernel_each_way_without_cpu_islands():
    x = torch.randn(4, 6)
    want, want_grad = _gelu_grads(x, "none")
    torch._dynamo.reset()
    before = len(compiler.COMPILED)
    with toychip.strict():
        out, grad = _gelu_grads(x.to("toychip"), "none", torch.compile(F.gelu, backend="toychip"))
    torch.testing.assert_close(out.cpu(), want, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(grad.cpu(), want_grad, rtol=1e-5, atol=1e-6)
    forward, backward = compiler.COMPILED[before:]
    assert "erf" in forward.code() and (forward.launches, backward.launches) == (1, 1)


def test_eager_gelu_still_falls_back_for_chapter_07s_exercise():
    toychip.reset_coverage()
    F.gelu(torch.randn(3, device="toychip"))
    assert "gelu.default" not in toychip.coverage().native and toychip.coverage().fallback
