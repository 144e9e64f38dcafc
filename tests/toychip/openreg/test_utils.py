"""Mirrors OpenReg's test_utils.py: DLPack capsules of chip tensors (torch.utils.dlpack).

A capsule from the chip comes back as a tensor on the same chip sharing its memory.
"""
import pytest
import torch
from torch.utils.dlpack import to_dlpack

DEVICE = "toychip"


def _through_dlpack(tensor: torch.Tensor) -> torch.Tensor:
    return torch.from_dlpack(to_dlpack(tensor))


@pytest.mark.parametrize("index", [0, 1])
def test_open_device_dlpack(index):
    source = torch.randn(2, 3).to(f"{DEVICE}:{index}")
    imported = _through_dlpack(source)
    assert imported.device == source.device
    assert torch.equal(imported.cpu(), source.cpu())


def test_dlpack_roundtrip():
    source = torch.randn(2, 3, device=DEVICE)
    imported = _through_dlpack(source)
    assert imported.data_ptr() == source.data_ptr()      # a view of the same memory, not a copy
    imported.add_(1)
    assert torch.equal(source.cpu(), imported.cpu())


@pytest.mark.parametrize("shape", [(1,), (2, 3), (4, 5, 6), (1, 2, 3, 4)])
def test_dlpack_different_shapes(shape):
    source = torch.randn(shape, device=DEVICE)
    imported = _through_dlpack(source)
    assert imported.shape == source.shape
    assert torch.equal(imported.cpu(), source.cpu())


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.int32, torch.int64, torch.bool])
def test_dlpack_different_dtypes(dtype):
    """Upstream skips this (its test compares with a float-only kernel); the chip passes it."""
    source = torch.arange(6).reshape(2, 3).remainder(2).to(dtype).to(DEVICE)
    imported = _through_dlpack(source)
    assert imported.dtype == dtype
    assert torch.equal(imported.cpu(), source.cpu())


def test_dlpack_cross_device():
    host = torch.randn(2, 3)
    imported = _through_dlpack(host.to(DEVICE))
    assert imported.device.type == DEVICE
    assert torch.equal(imported.cpu(), host)


def test_dlpack_non_contiguous():
    transposed = torch.randn(3, 4, device=DEVICE).t()
    imported = _through_dlpack(transposed)
    assert (imported.shape, imported.stride()) == (transposed.shape, transposed.stride())
    assert torch.equal(imported.cpu(), transposed.cpu())
