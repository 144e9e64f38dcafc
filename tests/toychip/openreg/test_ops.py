"""Mirrors OpenReg's tests/test_ops.py: factories, copies, a few ops, out= into strided views, the
CPU fallback and scaled_dot_product_attention's PrivateUse1 backend.

``test_empty``: upstream also creates a named tensor (``names=[...]``); torch 2.13 has no named
tensors (no ``names=`` argument, no ``Tensor.names``), so that line has no counterpart here.
The SDPA checks are shared with test_sdpa.py (tests/helpers/openreg_sdpa.py).
"""
import pytest
import torch

import openreg_sdpa
import toychip

NOT_MIRRORED = {
    "TestQuantization.test_quantize":
        "a quantized tensor on the chip needs a quantizer and kernels for the QuantizedPrivateUse1 key, "
        "made in C++ (at::new_qtensor with the chip's allocator; _empty_affine_quantized has no kernel "
        "there); the chip's runtime has no quantized tensors, and torch 2.13 deprecates their creation "
        "functions",
    "TestAutogradFunction.test_compile_autograd_function_returns_self":
        "needs OpenReg's own C++ op custom_autograd_fn_returns_self, an op whose AutogradPrivateUse1 kernel "
        "is a C++ autograd::Function returning its input; the chip registers NumPy kernels only "
        "(toychip.custom_kernels), and torch.library.custom_op refuses outputs that alias inputs",
    "TestAutogradFunction.test_compile_autograd_function_aliasing":
        "needs OpenReg's own C++ op custom_autograd_fn_aliasing, an op whose AutogradPrivateUse1 kernel is a "
        "C++ autograd::Function returning a view of its input; the chip registers NumPy kernels only "
        "(toychip.custom_kernels), and torch.library.custom_op refuses outputs that alias inputs",
}


# ----------------------------------------------------------------- TestFactory
def test_empty():
    x = torch.empty(3, device="toychip")
    assert x.device.type == "toychip" and x.shape == (3,)
    x = torch.empty([2, 3, 4, 5], device="toychip:1")
    assert x.device == torch.device("toychip:1") and x.shape == (2, 3, 4, 5)
    with torch._subclasses.fake_tensor.FakeTensorMode():   # fake tensors keep the device, allocate nothing
        z = torch.empty(3, 3, device="toychip") + torch.empty(3, 3, device="toychip:0")
        assert z.device.type == "toychip" and z.shape == (3, 3)


def test_zeros():
    y = torch.zeros(3, device="toychip")
    assert y.device.type == "toychip" and y.shape == (3,)
    assert torch.equal(y.cpu(), torch.zeros(3))


def test_tensor():
    z = torch.tensor((), device="toychip")
    assert z.device.type == "toychip" and z.shape == (0,)


# ----------------------------------------------------------------- TestCopy
def test_copy_same_device():
    a = torch.arange(10.0, device="toychip")
    b = a.clone()
    assert b.device == a.device and b.data_ptr() != a.data_ptr()
    assert torch.equal(b.cpu(), torch.arange(10.0))


def test_cross_device_copy():
    a = torch.rand(10)
    assert torch.equal(a.to("toychip").add(2).to("cpu"), a + 2)


def test_cross_diff_devices_copy():
    a = torch.arange(10.0, device="toychip:0").to("toychip:1")
    assert a.device == torch.device("toychip:1")
    assert torch.equal(a.cpu(), torch.arange(10.0))


# ----------------------------------------------------------------- TestOps
def test_masked_select():
    x = torch.randn(10)
    chip = x.to("toychip")
    assert torch.equal(torch.masked_select(chip, chip.gt(0)).cpu(), x.masked_select(x.gt(0)))


def test_expand():
    x = torch.tensor([[1], [2], [3]], device="toychip")
    y = x.expand(3, 2)
    assert torch.equal(y.cpu(), torch.tensor([[1, 1], [2, 2], [3, 3]]))
    assert y.data_ptr() == x.data_ptr()   # a view: no data moved


def test_resize():
    x = torch.randn(4, 4).to("toychip")
    assert x.untyped_storage().nbytes() == 16 * 4
    x.resize_(2, 2, 2, 2)
    assert x.shape == (2, 2, 2, 2)
    assert x.untyped_storage().nbytes() == 16 * 4   # same number of elements: the memory is kept


def test_printing():
    text = repr(torch.ones(20, device="toychip"))
    assert "device='toychip:0'" in text and "1., 1." in text


# ----------------------------------------------------------------- TestSTUB
@pytest.mark.filterwarnings("ignore:An output with one or more elements was resized")
def test_backend_dispatchstub():
    """abs into an out= that views every 2nd / 3rd column of a larger tensor: the base gets the CPU's
    values (for every 3rd column the view has the wrong shape and is resized over the base's memory)."""
    x = torch.randn(2, 2, 3)
    assert torch.equal(torch.abs(x.to("toychip")).cpu(), torch.abs(x))
    base = torch.randn(2, 2, 6)
    chip_base = base.to("toychip")
    for step in (2, 3):
        torch.abs(x, out=base[:, :, 0:6:step])
        torch.abs(x.to("toychip"), out=chip_base[:, :, 0:6:step])
        assert torch.equal(chip_base.cpu(), base)


# ----------------------------------------------------------------- TestFallback
def test_scalar_type_fallback():
    toychip.reset_coverage()
    x = torch.triu_indices(3, 3, device="toychip")   # a factory without a chip kernel
    assert x.device.type == "toychip"
    assert torch.equal(x.cpu(), torch.tensor([[0, 0, 0, 1, 1, 2], [0, 1, 2, 1, 2, 2]]))
    assert toychip.coverage().fallback


def test_tensor_type_fallback():
    x = torch.tensor([[1.0, 2, 3], [2, 3, 4]]).to("toychip")
    assert torch.equal(torch.sub(x, torch.tensor([1.0, 0, 2]).to("toychip")).cpu(),
                       torch.tensor([[0.0, 2, 1], [1, 3, 2]]))
    index = torch.tensor([1, 0]).to("toychip")
    toychip.reset_coverage()
    picked = x[index, index]   # advanced indexing falls back to the CPU
    assert picked.device.type == "toychip"
    assert torch.equal(picked.cpu(), torch.tensor([3.0, 1]))
    assert any(name.startswith("index") for name in toychip.coverage().fallback)


def test_tensorlist_type_fallback():
    v = torch.tensor([1.0, 2, 3]).to("toychip")
    z = torch._foreach_add((v, v), (v, v))
    assert [t.device.type for t in z] == ["toychip", "toychip"]
    for t in z:
        assert torch.equal(t.cpu(), torch.tensor([2.0, 4, 6]))


# ----------------------------------------------------------------- TestSDPA
def test_fused_sdp_choice_privateuseone():
    openreg_sdpa.check_fused_sdp_choice()


def test_scaled_dot_product_fused_attention_overrideable():
    openreg_sdpa.check_fused_attention_forward()


def test_scaled_dot_product_fused_attention_overrideable_backward():
    openreg_sdpa.check_fused_attention_backward()
