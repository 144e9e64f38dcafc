"""Mirrors OpenReg's tests/test_misc.py: the backend's name, its device module, the generated methods, type strings.

``import toychip`` renames PrivateUse1 to "toychip", registers toychip.device as
``torch.toychip`` and generates the ``toychip()`` / ``is_toychip`` methods of tensors,
storages, modules and packed sequences (toychip.device.register). Upstream skips its
module and storage method tests (OpenReg lacked Parameter and untyped storage support);
the chip has both, so they are mirrored.
"""
import types

import pytest
import torch
from torch.nn.utils.rnn import PackedSequence
from torch.utils import backend_registration

import toychip  # noqa: F401  (registers the chip)

# The storage tests use TypedStorage (tensor.storage()) on purpose: upstream checks it too.
pytestmark = pytest.mark.filterwarnings("ignore:TypedStorage is deprecated:UserWarning")


def test_backend_module_name():
    assert torch._C._get_privateuse1_backend_name() == "toychip"
    torch.utils.rename_privateuse1_backend("toychip")  # the same name again is fine
    with pytest.raises(RuntimeError, match="has already been set"):
        torch.utils.rename_privateuse1_backend("dev")


def test_backend_module_registration():
    fake = types.ModuleType("fake_module")
    with pytest.raises(RuntimeError, match="Expected one of cpu"):
        torch._register_device_module("dev", fake)
    with pytest.raises(RuntimeError, match="The runtime module of"):
        torch._register_device_module("toychip", fake)


def test_backend_module_function():
    with pytest.raises(RuntimeError, match="Try to call torch.toychip"):
        backend_registration._get_custom_mod_func("func_name_")
    assert backend_registration._get_custom_mod_func("device_count")() == 2


def test_backend_module_function_error_handling():
    with pytest.raises(RuntimeError, match="Try to call torch.toychip.non_existent_func"):
        backend_registration._get_custom_mod_func("non_existent_func")
    assert backend_registration._get_custom_mod_func("device_count") is torch.toychip.device_count


def test_backend_generate_methods():
    with pytest.raises(RuntimeError, match="The custom device module of"):
        torch.utils.generate_methods_for_privateuse1_backend()  # the chip generated them at import
    for owner in (torch.Tensor, torch.TypedStorage, torch.UntypedStorage, PackedSequence):
        assert hasattr(owner, "is_toychip") and hasattr(owner, "toychip"), owner
    assert hasattr(torch.nn.Module, "toychip")


def test_backend_tensor_methods():
    x = torch.empty(4, 4)
    assert not x.is_toychip
    for device in (torch.device("toychip"), torch.device("toychip:0"), 0):
        assert x.toychip(device).is_toychip


def test_backend_module_methods():
    module = torch.nn.Linear(3, 3)
    assert module.weight.device.type == "cpu"
    assert module.toychip() is module
    assert module.weight.device.type == "toychip" and isinstance(module.weight, torch.nn.Parameter)


def test_backend_storage_methods():
    x = torch.arange(16.0).reshape(4, 4)
    for storage in (x.storage(), x.untyped_storage()):
        assert not storage.is_toychip
        on_chip = storage.toychip()
        assert on_chip.is_toychip and type(on_chip) is type(storage)
    assert torch.equal(torch.tensor([], device="toychip").set_(x.storage().toychip()).cpu(), x.flatten())


def test_backend_packed_sequence_methods():
    packed = PackedSequence(torch.rand(5, 3), torch.tensor([1, 1, 1, 1, 1]))
    assert not packed.is_toychip
    assert packed.toychip().is_toychip


def test_backend_packed_sequence_properties():
    packed = PackedSequence(torch.rand(5, 3), torch.tensor([1, 1, 1, 1, 1]))
    on_chip = packed.toychip()
    assert on_chip.is_toychip and on_chip.data.is_toychip
    assert torch.equal(on_chip.data.cpu(), packed.data)


def test_backend_tensor_methods_different_devices():
    x = torch.empty(4, 4)
    for index in (0, 1):
        y = x.toychip(index)
        assert y.is_toychip and y.device.index == index
    assert x.toychip(torch.device("toychip")).is_toychip


def test_backend_tensor_type():
    names = {torch.bool: "Bool", torch.double: "Double", torch.float32: "Float", torch.half: "Half",
             torch.int32: "Int", torch.int64: "Long", torch.int8: "Char", torch.short: "Short",
             torch.uint8: "Byte"}
    for dtype, name in names.items():
        assert torch.empty(4, 4, dtype=dtype, device="toychip").type() == f"torch.toychip.{name}Tensor"


def test_backend_type_methods(monkeypatch):
    # the dtype-named Tensor/Storage classes are legacy; PyTorch still names types by them
    cpu = torch.randn(8)
    assert cpu.type() == "torch.FloatTensor" and cpu.toychip().type() == "torch.toychip.FloatTensor"
    assert cpu.storage().type() == "torch.FloatStorage"
    storage = cpu.toychip().storage()
    assert storage.type() == "torch.storage.TypedStorage"  # the device module names no storage class

    class FloatStorageName:
        """What TypedStorage.type() reads: a class's module and name."""

        __module__ = "torch.toychip"
        __name__ = "FloatStorage"

    monkeypatch.setattr(torch.toychip, "FloatStorage", FloatStorageName(), raising=False)
    assert storage.type() == "torch.toychip.FloatStorage"
    assert cpu.int().toychip().storage().type() == "torch.storage.TypedStorage"  # no IntStorage named


def test_backend_storage_type_consistency():
    tensor = torch.randn(4, 4, device="toychip")
    storage = tensor.storage()
    assert storage.is_toychip and storage.device == tensor.device
    assert storage.size() == tensor.numel()
