"""Do unsupported ops fall back to the CPU correctly, counted, and fail in strict mode?"""
import pytest
import torch
import torch.nn.functional as F

import toychip


def test_fallback_result_matches_cpu(chip_pair):
    cpu, chip = chip_pair
    torch.testing.assert_close(torch.cumsum(chip, dim=1).cpu(), torch.cumsum(cpu, dim=1))
    pooled = F.avg_pool2d(chip.view(1, 1, 4, 5), 2)
    torch.testing.assert_close(pooled.cpu(), F.avg_pool2d(cpu.view(1, 1, 4, 5), 2))


def test_fallback_inplace_writes_back(chip_pair):
    cpu, chip = chip_pair
    chip.cumsum_(0)
    cpu.cumsum_(0)
    torch.testing.assert_close(chip.cpu(), cpu)


def test_coverage_counts_native_and_fallback(chip_pair):
    _, chip = chip_pair
    toychip.reset_coverage()
    torch.relu(chip)
    torch.relu(chip)
    torch.cumsum(chip, dim=0)
    cov = toychip.coverage()
    assert cov.native["relu.default"] == 2
    assert cov.fallback["cumsum.out"] == 1
    assert 0 < cov.native_fraction < 1
    assert "cumsum.out" in str(cov)


def test_fallback_copies_are_charged(chip_pair):
    _, chip = chip_pair
    with toychip.profile() as p:
        torch.cumsum(chip, dim=0)
    assert p.copies >= 2  # input to the CPU, result back
    assert p.kernels["copy:to_cpu"].calls >= 1


def test_strict_mode_names_the_op_and_is_restored(chip_pair):
    _, chip = chip_pair
    with toychip.strict():
        torch.relu(chip)  # native ops still run
        with pytest.raises(toychip.FallbackError, match=r"aten\.cumsum\.out has no chip kernel"):
            torch.cumsum(chip, dim=0)
    torch.cumsum(chip, dim=0)  # strict mode is off again


def test_a_declined_kernel_falls_back():
    torch.manual_seed(0)
    conv = torch.nn.Conv2d(2, 2, 3, groups=2)   # the chip's conv2d has no groups
    x = torch.randn(1, 2, 5, 5)
    toychip.reset_coverage()
    out = conv.to("toychip")(x.to("toychip"))
    torch.testing.assert_close(out.cpu(), conv.cpu()(x))
    assert toychip.coverage().fallback["convolution.default"] == 1


def test_fallback_out_argument_is_resized():
    out = torch.arange(5, device="toychip")   # arange.start_out resizes an empty chip tensor
    assert torch.equal(out.cpu(), torch.arange(5))
