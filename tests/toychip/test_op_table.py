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


FORMATS = [(torch.channels_last, (2, 3, 4, 5)), (torch.channels_last_3d, (2, 3, 2, 4, 5))]


@pytest.mark.parametrize("memory_format, shape", FORMATS)
def test_memory_formats_give_the_cpus_strides(memory_format, shape):
    cpu = torch.randn(shape)
    chip = cpu.to("toychip")
    made = {
        "empty": lambda t: torch.empty(shape, device=t.device, memory_format=memory_format),
        "empty_like": lambda t: torch.empty_like(t, memory_format=memory_format),
        "to": lambda t: t.to(memory_format=memory_format),
        "contiguous": lambda t: t.contiguous(memory_format=memory_format),
        "clone of a channels-last tensor": lambda t: t.contiguous(memory_format=memory_format).clone(),
    }
    for name, make in made.items():
        assert make(chip).stride() == make(cpu).stride(), name
        assert make(chip).is_contiguous(memory_format=memory_format), name
    torch.testing.assert_close(chip.contiguous(memory_format=memory_format).cpu(), cpu)


def test_a_memory_format_that_does_not_fit_the_rank_is_refused_as_on_cpu():
    with pytest.raises(RuntimeError, match="required rank 4 tensor to use channels_last format"):
        torch.empty(2, 3, 4, device="toychip", memory_format=torch.channels_last)


def test_kernels_compute_cpu_values_on_channels_last_inputs():
    torch.manual_seed(0)
    x, w = torch.randn(2, 3, 6, 6), torch.randn(4, 3, 3, 3)
    chip_x, chip_w = (t.to("toychip").contiguous(memory_format=torch.channels_last) for t in (x, w))
    cases = [lambda a, b: F.relu(a) * 2 + a, lambda a, b: a.sum(dim=(2, 3)), lambda a, b: F.conv2d(a, b, padding=1),
             lambda a, b: F.max_pool2d(a, 2), lambda a, b: F.batch_norm(a, None, None, training=True)]
    for fn in cases:
        torch.testing.assert_close(fn(chip_x, chip_w).cpu(), fn(x, w))
