"""Does lazy mode record instead of running, materialise on demand, fuse, and cache?"""
import torch
import torch.nn as nn
import torch.nn.functional as F

import toychip
from toychip import lazy_tensor


def _chain(x):
    return torch.relu((x + 1.0) * 2.0 - 0.5)


def test_recording_launches_nothing_until_materialised(chip_pair):
    cpu, chip = chip_pair
    with toychip.profile() as p:
        with toychip.lazy():
            out = _chain(chip)
            assert p.launches == 0
            assert hasattr(out.untyped_storage(), "_lazy")
            result = out.cpu()          # materialises
    assert p.launches == 1              # one fused kernel for the whole chain
    torch.testing.assert_close(result, _chain(cpu))


def test_item_print_and_mark_step_materialise(chip_pair):
    cpu, chip = chip_pair
    with toychip.lazy():
        total = (chip * 2).sum()
        assert abs(total.item() - (cpu * 2).sum().item()) < 1e-4
        shown = repr(chip + 1)
        assert "device='toychip:0'" in shown
        pending = chip - 1
        toychip.mark_step()
        assert not hasattr(pending.untyped_storage(), "_lazy")
    torch.testing.assert_close(pending.cpu(), cpu - 1)


def test_fallback_materialises_its_inputs_first(chip_pair):
    cpu, chip = chip_pair
    with toychip.lazy():
        out = torch.cumsum(chip * 3, dim=1)   # cumsum has no chip kernel
    torch.testing.assert_close(out.cpu(), torch.cumsum(cpu * 3, dim=1))


def test_dead_code_is_removed(chip_pair):
    _, chip = chip_pair
    toychip.reset_lazy_metrics()
    with toychip.lazy():
        kept = chip + 1
        dead = chip * 5
        del dead
    metrics = toychip.lazy_metrics()
    assert metrics.nodes_recorded == 2
    assert metrics.nodes_executed == 1
    assert metrics.dead_nodes_removed == 1
    assert kept.cpu().shape == chip.shape


def test_dump_ir_lists_pending_ops(chip_pair):
    _, chip = chip_pair
    with toychip.lazy():
        out = torch.relu(chip * 2)
        text = toychip.dump_ir([out])
    assert "device_data()" in text
    assert "aten.mul.Tensor(%0, 2)" in text
    assert "aten.relu.default(%1)" in text


def test_pointwise_chain_is_fused_in_the_program(chip_pair):
    _, chip = chip_pair
    with toychip.lazy():
        _chain(chip).cpu()
    source = toychip.lazy_metrics().last_program.source
    assert "fused: add -> mul -> sub -> relu" in source
    assert "out=" in source


def test_repeated_training_step_hits_the_graph_cache():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4)).to("toychip")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(5, 8).to("toychip"), torch.randint(0, 4, (5,)).to("toychip")
    lazy_tensor.clear_cache()
    toychip.reset_lazy_metrics()
    for _ in range(3):
        with toychip.lazy():
            opt.zero_grad()
            F.cross_entropy(model(x), y).backward()
            opt.step()
            toychip.mark_step()
    metrics = toychip.lazy_metrics()
    assert metrics.graphs_executed == 3
    assert metrics.cache_misses == 1
    assert metrics.cache_hits == 2


def test_inplace_on_a_partial_view_runs_eagerly(chip_pair):
    cpu, chip = chip_pair
    with toychip.lazy():
        chip[0].add_(1.0)
        scaled = chip * 2
    cpu[0].add_(1.0)
    torch.testing.assert_close(scaled.cpu(), cpu * 2)


def test_a_declined_kernel_runs_eagerly_in_lazy_mode():
    torch.manual_seed(0)
    conv = nn.Conv2d(2, 2, 3, groups=2)
    x = torch.randn(1, 2, 5, 5)
    chip_conv, chip_x = conv.to("toychip"), x.to("toychip")
    with toychip.lazy():
        out = torch.relu(chip_conv(chip_x))
    torch.testing.assert_close(out.cpu(), torch.relu(conv.cpu()(x)))


def test_a_matmul_epilogue_whose_matmul_reads_one_input_twice_runs():
    x = torch.randn(4, 4)
    with toychip.lazy():
        out = torch.relu(x.to("toychip").mm(x.to("toychip")))
    torch.testing.assert_close(out.cpu(), torch.relu(x.mm(x)))
