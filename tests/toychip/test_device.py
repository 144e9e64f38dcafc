"""Is the chip a real PyTorch device: names, moves, printing, autograd, device module?"""
import pytest
import torch
import torch.nn as nn

import toychip


def test_factory_on_device_and_device_name():
    x = torch.randn(4, device="toychip")
    assert x.device == torch.device("toychip:0")
    assert x.is_toychip
    assert str(x.device) == "toychip:0"


def test_to_and_cpu_round_trip(chip_pair):
    cpu, chip = chip_pair
    assert torch.equal(chip.cpu(), cpu)
    assert torch.equal(chip.to("cpu"), cpu)


def test_print_shows_values_and_device(chip_pair):
    cpu, chip = chip_pair
    text = repr(chip)
    assert "device='toychip:0'" in text
    assert f"{cpu[0, 0].item():.4f}" in text


def test_model_to_moves_parameters():
    model = nn.Linear(3, 2).to("toychip")
    assert all(p.device.type == "toychip" for p in model.parameters())


def test_autograd_through_the_chip(chip_pair):
    cpu, chip = chip_pair
    a, b = cpu.clone().requires_grad_(), chip.clone().requires_grad_()
    (a * a).sum().backward()
    (b * b).sum().backward()
    assert torch.allclose(b.grad.cpu(), a.grad)


def test_device_module_functions():
    assert torch.toychip is toychip.device  # the device module PyTorch calls
    assert torch.toychip.is_available()
    assert torch.toychip.device_count() == 2
    assert torch.toychip.current_device() == 0
    torch.toychip.synchronize()


def test_manual_seed_all_seeds_the_chip_rng():
    torch.toychip.manual_seed_all(7)
    first = torch.randn(5, device="toychip").cpu()
    torch.toychip.manual_seed_all(7)
    assert torch.equal(torch.randn(5, device="toychip").cpu(), first)
    torch.manual_seed(7)  # torch.manual_seed seeds custom devices too
    assert torch.equal(torch.randn(5, device="toychip").cpu(), first)


def test_device_index_out_of_range_is_a_clear_error():
    with pytest.raises(RuntimeError, match="toychip device index 2 is out of range"):
        torch.randn(3, device="toychip:2")
    with pytest.raises(RuntimeError, match="out of range"):
        torch.toychip.synchronize(3)


@pytest.mark.parametrize("dtype", [torch.complex64, torch.float8_e4m3fn])
def test_unsupported_dtype_names_the_dtype(dtype):
    with pytest.raises(TypeError, match=f"does not support dtype {dtype}"):
        torch.zeros(3, dtype=dtype, device="toychip")
    with pytest.raises(TypeError, match=f"does not support dtype {dtype}"):
        torch.zeros(3, dtype=dtype).to("toychip")


def test_dispatch_keys_are_the_privateuse1_set(chip_pair):
    keys = str(torch._C._dispatch_keys(chip_pair[1]))
    for key in ("PrivateUse1", "ADInplaceOrView", "AutogradPrivateUse1"):
        assert key in keys
    assert "PrivateUse1: registered" in torch._C._dispatch_dump("aten::relu")


def test_rng_state_round_trips():
    state = torch.toychip.get_rng_state()
    first = torch.randn(4, device="toychip").cpu()
    torch.toychip.set_rng_state(state)
    assert state.dtype == torch.uint8
    assert torch.equal(torch.randn(4, device="toychip").cpu(), first)
