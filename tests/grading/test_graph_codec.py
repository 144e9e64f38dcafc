"""FX graphs cross as data and are rebuilt from an allowlist; nothing else gets through."""
import os

import pytest
import torch
import torch.fx as fx
from torch.fx.experimental.proxy_tensor import make_fx

from course_models.ch03_models import ConvBNNet, MixedActivations, pointwise_chains, randomize_batchnorm_stats
from grader.sandbox.graph_codec import GraphCodecError, decode, encode, pack, unpack
from grader.sandbox.plain_data import dumps, loads


def through_the_wire(gm):
    return decode(loads(dumps(encode(gm))))


@pytest.mark.parametrize("make, inputs", [
    (lambda: fx.symbolic_trace(MixedActivations()), (torch.randn(2, 8),)),
    (lambda: fx.symbolic_trace(randomize_batchnorm_stats(ConvBNNet(), torch.Generator().manual_seed(0)).eval()),
     (torch.randn(1, 3, 8, 8),)),
    (lambda: make_fx(pointwise_chains)(torch.randn(4, 4), torch.randn(4, 4)), (torch.randn(4, 4), torch.randn(4, 4))),
    (lambda: fx.symbolic_trace(lambda x: x.view(x.shape[0], -1).sum(dim=1, dtype=torch.float64)[1:]),
     (torch.randn(3, 2, 2),)),
])
def test_rebuilt_graph_computes_the_same(make, inputs):
    original = make()
    rebuilt = through_the_wire(original)
    expected, got = original(*inputs), rebuilt(*inputs)
    for e, g in zip(expected if isinstance(expected, tuple) else (expected,), got if isinstance(got, tuple) else (got,)):
        assert torch.allclose(e, g)


def smuggle(target, *extra):
    graph = fx.Graph()
    x = graph.placeholder("x")
    graph.output(graph.call_function(target, (x, *extra)))
    return fx.GraphModule(torch.nn.Module(), graph)


def local_helper(x):
    return os.system("echo pwned")


@pytest.mark.parametrize("target, extra", [
    (local_helper, ()), (os.system, ()), (eval, ()), (torch.save, ("file",)), (getattr, ("__class__",)),
])
def test_targets_outside_the_allowlist_are_refused(target, extra):
    with pytest.raises(GraphCodecError):
        through_the_wire(smuggle(target, *extra))


def test_forged_module_names_are_never_imported():
    data = encode(smuggle(torch.relu))
    data["nodes"][1]["target"] = "fn:antigravity:geohash"
    with pytest.raises(GraphCodecError, match="not a torch"):
        decode(data)


def test_pack_and_unpack_ship_graphs_inside_case_inputs():
    gm = fx.symbolic_trace(MixedActivations())
    shipped = unpack(pack({"module": gm, "inputs": (torch.ones(1, 8),)}))
    assert isinstance(shipped["module"], fx.GraphModule) and torch.allclose(shipped["module"](torch.ones(1, 8)), gm(torch.ones(1, 8)))


def test_a_tensor_method_called_as_a_function_crosses_as_a_method_call():
    graph = fx.Graph()
    x = graph.placeholder("x")
    graph.output(graph.call_function(torch.Tensor.mean, (graph.call_function(torch.Tensor.relu, (x,)),), {"dim": 0}))
    original = fx.GraphModule(torch.nn.Module(), graph)
    rebuilt = through_the_wire(original)
    assert [n.op for n in rebuilt.graph.nodes] == ["placeholder", "call_method", "call_method", "output"]
    inputs = torch.randn(3, 4)
    assert torch.equal(rebuilt(inputs), original(inputs))
