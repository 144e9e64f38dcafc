"""Do the lazy-mode views show a fusion policy's groups and the barriers between graphs?"""
import torch

import toychip
from toychip import views


def test_lazy_ir_view_shows_a_fusion_policys_groups(chip_pair):
    _, chip = chip_pair
    with toychip.lazy(fusion=lambda nodes: []):
        out = torch.relu(chip * 2 + 1)
        default = views.lazy_ir_view([out])
        pairs = views.lazy_ir_view([out], fusion=lambda nodes: [[1, 2]])
    assert [len(c.node_ids) for c in default.clusters] == [3]
    assert [len(c.node_ids) for c in pairs.clusters] == [2]


def test_sync_timeline_view_marks_barriers(chip_pair):
    _, chip = chip_pair
    toychip.reset_lazy_metrics()
    with toychip.lazy():
        (chip * 2).sum().item()
        y = chip + 1
        toychip.mark_step()
    view = views.sync_timeline_view()
    assert [n.kind for n in view.nodes] == ["sync_barrier", "sync_planned"]
    assert "reason: item" in view.nodes[0].details
    assert len(view.edges) == 1
