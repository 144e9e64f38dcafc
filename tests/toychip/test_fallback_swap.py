"""Can a learner swap in their own fallback, and is the default restored afterwards?"""
import pytest
import torch

import toychip


def test_use_fallback_routes_unsupported_ops_and_restores(chip_pair):
    cpu, chip = chip_pair
    seen = []

    def recording_fallback(op, *args, **kwargs):
        seen.append(str(op))
        return toychip.cpu_fallback(op, *args, **kwargs)

    toychip.reset_coverage()
    with toychip.use_fallback(recording_fallback):
        out = torch.cumsum(chip, dim=0)
        torch.relu(chip)                       # native: never reaches a fallback
    torch.testing.assert_close(out.cpu(), torch.cumsum(cpu, dim=0))
    assert seen == ["aten.cumsum.out"]
    assert toychip.coverage().fallback["cumsum.out"] == 1   # still counted
    torch.cumsum(chip, dim=0)
    assert seen == ["aten.cumsum.out"]


def test_set_fallback_returns_the_previous_one(chip_pair):
    previous = toychip.set_fallback(lambda op, *a, **k: 1 / 0)
    try:
        with pytest.raises(ZeroDivisionError):
            torch.cumsum(chip_pair[1], dim=0)
    finally:
        toychip.set_fallback(previous)
    assert previous is toychip.cpu_fallback


def test_strict_mode_wins_over_a_custom_fallback(chip_pair):
    with toychip.use_fallback(toychip.cpu_fallback), toychip.strict():
        with pytest.raises(toychip.FallbackError):
            torch.cumsum(chip_pair[1], dim=0)
