"""Mirrors OpenReg's test_device_type.py: CPU <-> chip transfers, and PyTorch's device-type test framework on the chip.

Upstream's TestDeviceSpecificSkips is a set of examples of the framework's decorators
(``onlyCPU``, ``skipPRIVATEUSE1If``...), instantiated for every device type. Their mirrors
build a one-test class under the decorator, let ``instantiate_device_type_tests`` make its CPU
and chip copies, run them (``device_type_runs.outcomes``) and check which ran and which were
skipped. The other tests are plain tests of the chip, on both chips where a device index matters.
"""
import pytest
import torch
from device_type_runs import RAN, SKIPPED, outcomes
from torch.testing import make_tensor
from torch.testing._internal.common_device_type import (onlyCPU, onlyCUDA, onlyNativeDeviceTypes, onlyPRIVATEUSE1,
                                                        skipCPUIf, skipCUDAIf, skipPRIVATEUSE1If)
from torch.testing._internal.common_utils import TestCase

DEVICE = "toychip"
CHIPS = ["toychip:0", "toychip:1"]


def _feature_test(decorator=None, body=None):
    """A generic test class with one test, ``test_feature``, under ``decorator``; ``body(self, device)`` is its check."""
    def test_feature(self, device):
        if body is not None:
            body(self, device)
    if decorator is not None:
        test_feature = decorator(test_feature)
    return type("TestFeature", (TestCase,), {"test_feature": test_feature})


def _runs_on(device_type: str):
    def body(self, device):
        self.assertEqual(torch.device(device).type, device_type)
    return body


# --------------------------------------------------------------------------- transfers
@pytest.mark.parametrize("chip", CHIPS)
def test_to_device(chip):
    host = torch.randn(3, 4)
    moved = host.to(chip)
    assert moved.device == torch.device(chip)
    assert torch.equal(moved.cpu(), host)


@pytest.mark.parametrize("chip", CHIPS)
def test_to_device_with_copy(chip):
    x = torch.randn(3, 4, device=chip)
    assert x.to(chip) is x                          # already there: no copy
    copied = x.to(chip, copy=True)
    assert copied.data_ptr() != x.data_ptr()
    assert torch.equal(copied.cpu(), x.cpu())


@pytest.mark.parametrize("chip", CHIPS)
def test_clone(chip):
    x = torch.randn(3, 4, device=chip)
    clone = x.clone()
    assert clone.device == x.device and clone.data_ptr() != x.data_ptr()
    assert torch.equal(clone.cpu(), x.cpu())


@pytest.mark.parametrize("chip", CHIPS)
def test_copy_(chip):
    source, target = torch.randn(3, 4, device=chip), torch.empty(3, 4, device=chip)
    assert target.copy_(source) is target
    assert target.data_ptr() != source.data_ptr()
    assert torch.equal(target.cpu(), source.cpu())


@pytest.mark.parametrize("chip", CHIPS)
def test_copy_from_cpu(chip):
    host, target = torch.randn(3, 4), torch.empty(3, 4, device=chip)
    target.copy_(host)
    assert torch.equal(target.cpu(), host)


@pytest.mark.parametrize("chip", CHIPS)
def test_copy_to_cpu(chip):
    source, host = torch.randn(3, 4, device=chip), torch.empty(3, 4)
    host.copy_(source)
    assert torch.equal(host, source.cpu())


def test_round_trip():
    host = torch.randn(3, 4)
    back = host.to(CHIPS[0]).to(CHIPS[1]).to("cpu")
    assert back.device.type == "cpu" and torch.equal(back, host)


# --------------------------------------------------------------------------- the framework's decorators
def test_cpu_only_feature():
    runs = outcomes(_feature_test(onlyCPU, _runs_on("cpu")))
    assert runs["test_feature_cpu"] == (RAN, "")
    assert runs["test_feature_toychip"] == (SKIPPED, "Only runs on cpu")


def test_cuda_only_feature():
    runs = outcomes(_feature_test(onlyCUDA))
    assert runs["test_feature_toychip"] == (SKIPPED, "Only runs on cuda")   # the chip does not pass for CUDA


def test_skip_on_cpu():
    runs = outcomes(_feature_test(skipCPUIf(True, "not on the CPU"), _runs_on(DEVICE)))
    assert runs["test_feature_cpu"] == (SKIPPED, "not on the CPU")
    assert runs["test_feature_toychip"] == (RAN, "")


def test_skip_on_cuda():
    runs = outcomes(_feature_test(skipCUDAIf(True, "not on CUDA")))
    assert runs["test_feature_cpu"] == runs["test_feature_toychip"] == (RAN, "")


def test_native_device_only():
    def body(self, device):
        self.assertEqual(make_tensor((2, 2), device=device, dtype=torch.float32).device.type, torch.device(device).type)
    runs = outcomes(_feature_test(onlyNativeDeviceTypes, body))
    assert runs["test_feature_toychip"] == (RAN, "")            # a PrivateUse1 backend counts as native


def test_privateuse1_only():
    runs = outcomes(_feature_test(onlyPRIVATEUSE1, _runs_on(torch._C._get_privateuse1_backend_name())))
    assert runs["test_feature_toychip"] == (RAN, "")
    assert runs["test_feature_cpu"][0] == SKIPPED


def test_conditional_skip_privateuse1():
    skipped = outcomes(_feature_test(skipPRIVATEUSE1If(True, "the chip lacks it")))
    assert skipped["test_feature_toychip"] == (SKIPPED, "the chip lacks it")
    assert skipped["test_feature_cpu"] == (RAN, "")
    assert outcomes(_feature_test(skipPRIVATEUSE1If(False, "the chip lacks it")))["test_feature_toychip"] == (RAN, "")


@pytest.mark.parametrize("capability, chip_outcome", [("device_count", RAN), ("no_such_capability", SKIPPED)])
def test_runtime_skip_pattern(capability, chip_outcome):
    """A test that asks the backend's device module at run time, and skips if a capability is missing."""
    def body(self, device):
        backend = torch._C._get_privateuse1_backend_name()
        if torch.device(device).type == backend and not hasattr(getattr(torch, backend), capability):
            self.skipTest(f"{backend} has no {capability}")
        self.assertEqual(make_tensor((2, 2), device=device, dtype=torch.float32).shape, (2, 2))
    runs = outcomes(_feature_test(body=body))
    assert runs["test_feature_cpu"] == (RAN, "")
    assert runs["test_feature_toychip"][0] == chip_outcome


# --------------------------------------------------------------------------- the chip, as the framework's tests see it
def test_tensor_operations():
    assert set(outcomes(_feature_test(), except_for=("cpu", "cuda"))) == {"test_feature_toychip"}
    torch.manual_seed(0)
    a, b = torch.randn(3, 4), torch.randn(3, 4)
    chip_a, chip_b = a.to(DEVICE), b.to(DEVICE)
    for op in (torch.add, torch.mul, torch.sub):
        assert torch.equal(op(chip_a, chip_b).cpu(), op(a, b))
    torch.testing.assert_close((chip_a / chip_b).cpu(), a / b)


@pytest.mark.parametrize("chip", CHIPS)
def test_basic_tensor_creation(chip):
    for factory, value in ((torch.empty, None), (torch.zeros, 0), (torch.ones, 1)):
        x = factory(3, 4, device=chip, dtype=torch.float32)
        assert (x.device, x.shape, x.dtype) == (torch.device(chip), (3, 4), torch.float32)
        if value is not None:
            assert torch.all(x == value).item()


def test_dtype_propagation():
    x = torch.randn(3, 4, device=DEVICE)
    assert x.dtype == (x + x).dtype == torch.float32
    wide = torch.randn(3, 4, device=DEVICE, dtype=torch.float64)
    assert (wide * 2).dtype == torch.float64
    converted = x.to(torch.float64)
    assert converted.dtype == torch.float64 and converted.device.type == DEVICE
    assert torch.randint(0, 100, (3, 4), device=DEVICE).dtype == torch.int64
    flags = torch.zeros(3, 4, device=DEVICE, dtype=torch.bool)
    assert flags.dtype == torch.bool and torch.all(~flags).item()
