"""Do float16/bfloat16 (and the small integer types) live on the chip with CPU-exact results?"""
import pytest
import torch
import torch.nn.functional as F

import toychip

HALVES = [torch.float16, torch.bfloat16]


@pytest.mark.parametrize("dtype", HALVES)
def test_half_round_trip_is_exact(dtype):
    cpu = torch.randn(4, 5).to(dtype)
    chip = cpu.to("toychip")
    assert chip.dtype == dtype
    assert torch.equal(chip.cpu(), cpu)
    assert torch.equal(torch.empty(3, dtype=dtype, device="toychip").fill_(1.5).cpu(), torch.full((3,), 1.5, dtype=dtype))


@pytest.mark.parametrize("dtype", HALVES)
@pytest.mark.parametrize("fn", [lambda a, b: a + b, lambda a, b: a * b - 1, lambda a, b: torch.relu(a),
                                lambda a, b: torch.exp(a), lambda a, b: a @ b.t(), lambda a, b: a.sum(dim=1),
                                lambda a, b: F.silu(a), lambda a, b: F.softmax(a, dim=1)])
def test_half_kernels_compute_in_float32_and_round_like_cpu(dtype, fn):
    torch.manual_seed(0)
    a, b = torch.randn(4, 5).to(dtype), torch.randn(4, 5).to(dtype)
    got = fn(a.to("toychip"), b.to("toychip"))
    want = fn(a, b)
    assert got.dtype == want.dtype
    torch.testing.assert_close(got.cpu(), want, atol=1e-2, rtol=1e-2)


@pytest.mark.parametrize("dtype", HALVES)
def test_half_pointwise_bits_match_cpu(dtype):
    torch.manual_seed(1)
    a, b = torch.randn(64).to(dtype), torch.randn(64).to(dtype)
    assert torch.equal((a.to("toychip") * b.to("toychip")).cpu(), a * b)


@pytest.mark.parametrize("dtype", HALVES)
def test_half_inplace_casts_and_item(dtype):
    cpu = torch.randn(6).to(dtype)
    chip = cpu.to("toychip")
    chip.add_(1.0)
    cpu.add_(1.0)
    assert torch.equal(chip.cpu(), cpu)
    assert chip[2].item() == cpu[2].item()
    assert torch.equal(chip.float().cpu(), cpu.float())
    assert torch.equal(chip.float().to(dtype).cpu(), cpu)


def test_half_mixed_with_float32_promotes_to_float32():
    a = torch.randn(5).to(torch.bfloat16)
    b = torch.randn(5)
    got = a.to("toychip") + b.to("toychip")
    assert got.dtype == torch.float32
    torch.testing.assert_close(got.cpu(), a + b)


def test_half_fallback_round_trips():
    cpu = torch.randn(3, 4).to(torch.bfloat16)
    torch.testing.assert_close(torch.cumsum(cpu.to("toychip"), dim=1).cpu(), torch.cumsum(cpu, dim=1))


def test_uint8_masks():
    x = torch.randn(6)
    mask = (x > 0).to(torch.uint8)
    chip_mask = mask.to("toychip")
    assert chip_mask.dtype == torch.uint8
    assert torch.equal(chip_mask.cpu(), mask)
    assert torch.equal((x.to("toychip") * chip_mask).cpu(), x * mask)


@pytest.mark.parametrize("source, requested", [(torch.float16, torch.float32), (torch.bfloat16, torch.float32),
                                                (torch.float32, torch.float16), (torch.float32, torch.bfloat16)])
def test_a_reductions_dtype_argument_names_its_result_dtype(source, requested):
    x = torch.randn(3, 4).to(source)
    for reduce in (lambda t: t.sum(dtype=requested), lambda t: t.sum(1, dtype=requested)):
        chip, cpu = reduce(x.to("toychip")), reduce(x)
        assert chip.dtype == cpu.dtype == requested
        torch.testing.assert_close(chip.cpu(), cpu, atol=1e-2, rtol=1e-2)   # the CPU rounds the inputs first


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_a_zero_dimensional_16_bit_result_keeps_its_dtype(dtype):
    """NumPy returns a scalar, not an array, for a 0-d result; it is stored like any other."""
    a, b = torch.tensor(1.5, dtype=dtype), torch.tensor(2.25, dtype=dtype)
    got = torch.add(a.to("toychip"), b.to("toychip"))
    assert got.dtype == dtype and got.shape == () and got.cpu().item() == torch.add(a, b).item()
