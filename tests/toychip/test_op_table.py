"""Does each ATen op run on its chip kernel with CPU results, and refuse mixed devices?"""
import pytest
import torch
import torch.nn.functional as F

import toychip

UNARY = [torch.relu, torch.exp, torch.tanh, torch.sigmoid, torch.neg, torch.abs, F.silu,
         lambda t: t.sum(dim=1), lambda t: t.mean(), lambda t: t.amax(dim=0),
         lambda t: F.log_softmax(t, dim=1), lambda t: F.softmax(t, dim=0),
         lambda t: t.clamp(-0.5, 0.5), lambda t: t.pow(2), lambda t: t @ t.t()]


@pytest.mark.parametrize("fn", UNARY)
def test_unary_and_reduction_kernels_match_cpu(chip_pair, fn):
    cpu, chip = chip_pair
    torch.testing.assert_close(fn(chip).cpu(), fn(cpu))


def test_binary_kernels_broadcast_and_promote(chip_pair):
    cpu, chip = chip_pair
    row_c, row = cpu[0], chip[0]
    torch.testing.assert_close((chip * row - 1.5).cpu(), cpu * row_c - 1.5)
    ints = torch.arange(5)
    assert (chip + ints.to("toychip")).dtype == torch.float32
    assert (ints.to("toychip") / 2).dtype == torch.float32
    assert (chip > 0).dtype == torch.bool


def test_cpu_scalar_tensor_may_mix(chip_pair):
    cpu, chip = chip_pair
    torch.testing.assert_close((chip * torch.tensor(2.0)).cpu(), cpu * 2.0)


def test_mixing_devices_names_the_op(chip_pair):
    cpu, chip = chip_pair
    with pytest.raises(RuntimeError, match=r"aten\.add\.Tensor: expected all tensors on toychip"):
        chip + cpu


def test_ops_table_lists_kernels():
    listing = toychip.ops_table()
    assert "aten.addmm.default" in listing
    assert "aten.relu_.default" in listing   # in-place variants come for free
    assert "memory" in listing


@pytest.mark.parametrize("fn", [lambda t: t.sum(0), lambda t: t.mean(-1), lambda t: t.amax(0),
                                lambda t: t.argmax(0), lambda t: F.softmax(t, 0), torch.sigmoid, F.silu])
def test_zero_dim_tensors_reduce_over_dim_zero_like_cpu(fn):
    cpu = torch.tensor(0.75)
    torch.testing.assert_close(fn(cpu.to("toychip")).cpu(), fn(cpu))


def test_scalar_base_power_follows_type_promotion():
    exponent = torch.tensor([1, 2, 3])
    assert torch.pow(2.0, exponent.to("toychip")).dtype == torch.pow(2.0, exponent).dtype == torch.float32
    assert torch.pow(2, exponent.to("toychip")).dtype == torch.int64


def test_fallback_gets_tensors_for_scalars_cpp_wrapped():
    """take_along_dim calls remainder(indices, size): the boxed fallback sees a plain int."""
    x, index = torch.randn(2, 3), torch.tensor([[0, 1, -1]])
    torch.testing.assert_close(torch.take_along_dim(x.to("toychip"), index.to("toychip"), 1).cpu(),
                               torch.take_along_dim(x, index, 1))


def test_view_past_its_storage_raises_instead_of_reading_out_of_bounds():
    t = torch.zeros(4, device="toychip")
    with pytest.raises(RuntimeError, match="out of bounds for storage of size 16"):
        torch.as_strided(t, (3,), (2,), 0)                       # refused when made, as on the CPU


@pytest.mark.parametrize("fn", [lambda a, s: torch.select_scatter(a, s[0], 1, -1),
                                lambda a, s: torch.slice_scatter(a, s[:, :2], 1, 1, 5, 2),
                                lambda a, s: torch.diagonal_scatter(a, s[0, :3], -1)])
def test_scatter_into_a_view_runs_on_chip_kernels(fn):
    """Functionalisation turns writes into views into these ops (C++'s composite kernel
    cannot run them here: it sizes the copy from the C++ storage, empty on a Python backend)."""
    a, s = torch.randn(4, 4), torch.randn(4, 4)
    with toychip.strict():
        got = fn(a.to("toychip"), s.to("toychip")).cpu()
    torch.testing.assert_close(got, fn(a, s))
