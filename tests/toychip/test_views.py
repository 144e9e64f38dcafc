"""Do the visualiser hooks return GraphViews with the expected nodes and clusters?"""
import torch
import torch.nn as nn
from torch.fx.experimental.proxy_tensor import make_fx

import toychip
from toychip import views


def test_dispatch_keys_view_is_a_chain_ending_in_the_backend(chip_pair):
    view = views.dispatch_keys_view(chip_pair[1])
    ids = [n.id for n in view.nodes]
    assert ids[-1] == "PrivateUse1"
    assert "AutogradPrivateUse1" in ids
    assert all(n.kind == "dispatch_key" for n in view.nodes)
    assert len(view.edges) == len(ids) - 1


def test_partition_view_has_chip_cpu_and_fusion_clusters():
    model = nn.Sequential(nn.Conv2d(1, 2, 3), nn.ReLU(), nn.AvgPool2d(2), nn.Flatten(),
                          nn.Linear(8, 3), nn.ReLU()).to("toychip")
    torch._dynamo.reset()
    with torch.no_grad():
        torch.compile(model, backend="toychip")(torch.randn(1, 1, 6, 6).to("toychip"))
    view = views.partition_view()
    kinds = {c.kind for c in view.clusters}
    assert kinds == {"chip", "cpu", "fusion"}
    ids = {n.id for n in view.nodes}
    assert all(i in ids for c in view.clusters for i in c.node_ids)
    assert {n.kind for n in view.nodes} >= {"placeholder", "call_function", "output"}


def test_partition_view_of_an_uncompiled_graph():
    gm = make_fx(lambda x: torch.relu(x + 1).cumsum(0))(torch.randn(4, device="toychip"))
    view = views.partition_view(gm)
    assert [c.kind for c in view.clusters if c.kind != "fusion"] == ["chip", "cpu"]


def test_lazy_ir_view_shows_ops_and_fusion(chip_pair):
    _, chip = chip_pair
    with toychip.lazy():
        out = torch.relu(chip * 2 + 1)
        view = views.lazy_ir_view([out])
    assert [n.kind for n in view.nodes].count("lazy_op") == 3
    assert [c.kind for c in view.clusters] == ["fusion"]
