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


@pytest.mark.filterwarnings("ignore:An output with one or more elements was resized")
@pytest.mark.parametrize("step", [2, 3], ids=["same_shape", "resized"])
def test_fallback_out_into_a_strided_view_writes_its_base(step):
    """abs.out has no chip kernel: the fallback writes the CPU result into the view, and a view
    of the wrong shape is resized over its base's memory (as CPU does), not given new memory."""
    x = torch.randn(2, 2, 3)
    base_cpu = torch.randn(2, 2, 6)
    base_chip = base_cpu.to("toychip")
    torch.abs(x, out=base_cpu[:, :, 0:6:step])
    torch.abs(x.to("toychip"), out=base_chip[:, :, 0:6:step])
    assert torch.equal(base_chip.cpu(), base_cpu)


@pytest.mark.filterwarnings("ignore:torch.quantize_per_tensor")
def test_fallback_result_of_a_dtype_the_chip_lacks_is_a_clear_error():
    x = torch.randn(3, device="toychip")
    with pytest.raises(TypeError, match="toychip does not support dtype torch.qint8"):
        torch.quantize_per_tensor(x, 0.1, 10, torch.qint8)
