"""Does lazy mode say why each materialisation happened, and count its CPU fallbacks?"""
import pytest
import torch

import toychip
from toychip import lazy_tensor


@pytest.fixture
def fresh_metrics():
    toychip.reset_lazy_metrics()
    yield
    toychip.reset_lazy_metrics()


def _reasons() -> list[str]:
    return [event.reason for event in toychip.lazy_metrics().sync_log]


@pytest.mark.parametrize("barrier, reason", [
    (lambda t: t.sum().item(), "item"),
    (lambda t: t.cpu(), "host_copy"),
    (lambda t: t.tolist(), "host_copy"),
    (lambda t: repr(t), "print"),
    (lambda t: torch.nonzero(t > 0), "data_dependent_shape"),
    (lambda t: t[t > 0], "data_dependent_shape"),
    (lambda t: torch.cumsum(t, dim=0), "fallback"),
])
def test_each_barrier_is_logged_with_its_reason(chip_pair, fresh_metrics, barrier, reason):
    _, chip = chip_pair
    with toychip.lazy():
        barrier(chip * 2)
        assert _reasons() == [reason]
        toychip.mark_step()
    assert _reasons() == [reason]           # nothing left pending: mark_step and exit run nothing


def test_mark_step_and_exit_are_reasons_too(chip_pair, fresh_metrics):
    _, chip = chip_pair
    with toychip.lazy():
        a = chip + 1
        toychip.mark_step()
        b = a * 3
    assert _reasons() == ["mark_step", "exit"]
    assert toychip.lazy_metrics().sync_reasons == {"mark_step": 1, "exit": 1}
    assert b.shape == chip.shape


def test_a_partial_in_place_write_is_an_eager_write(chip_pair, fresh_metrics):
    _, chip = chip_pair
    with toychip.lazy():
        scaled = chip * 2
        scaled[0].add_(1.0)
    assert _reasons()[0] == "eager_write"


def test_sync_log_names_the_op_and_graph_size(chip_pair, fresh_metrics):
    _, chip = chip_pair
    with toychip.lazy():
        torch.relu(chip * 2 + 1).sum().item()
    event = toychip.lazy_metrics().sync_log[0]
    assert event == lazy_tensor.SyncEvent("item", "_local_scalar_dense.default", 4)


def test_fallback_ops_are_counted_only_inside_lazy_blocks(chip_pair, fresh_metrics):
    _, chip = chip_pair
    torch.cumsum(chip, dim=0)                                   # eager: not counted
    with toychip.lazy():
        torch.cumsum(chip + 1, dim=1)
        torch.cumsum(chip, dim=0)
        assert toychip.lazy_metrics().fallback_ops == {"cumsum.out": 2}   # live view
        torch.nonzero(chip)
    assert toychip.lazy_metrics().fallback_ops == {"cumsum.out": 2, "nonzero.default": 1}


def test_results_with_barriers_match_cpu(chip_pair):
    cpu, chip = chip_pair
    with toychip.lazy():
        y = chip * 2
        count = int((y > 0).sum().item())
        picked = y[y > 0] + 1
    assert count == int((cpu * 2 > 0).sum())
    torch.testing.assert_close(picked.cpu(), (cpu * 2)[cpu * 2 > 0] + 1)
