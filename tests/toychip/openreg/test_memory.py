"""Mirrors OpenReg's tests/test_memory.py: the device allocator, pinned host memory, two devices.

Upstream's leak tests only check that many allocate/free cycles do not crash; here each one also
checks the chip's own counters (``torch.toychip.memory_allocated``): after the cycles, the bytes
held are back where they started. Loop counts are smaller than upstream's (CI runs on 2 cores).
"""
import gc

import pytest
import torch

import toychip  # noqa: F401  (registers the chip)

NOT_MIRRORED = {}


@pytest.fixture(autouse=True)
def back_on_device_0():
    """Tests that switch the current chip leave toychip:0 current, as they found it."""
    yield
    torch.toychip.set_device(0)
    gc.collect()


def held(device: int = 0) -> int:
    """Bytes of tensors alive on ``toychip:device``, after collecting garbage."""
    gc.collect()
    return torch.toychip.memory_allocated(device)


# ----------------------------------------------------------------- TestDeviceAllocator
def test_basic_allocation():
    for shape in [(100,), (10000,), (10, 20, 30)]:
        t = torch.empty(shape, device="toychip")
        assert t.device.type == "toychip" and t.shape == shape
        assert t.untyped_storage().nbytes() == t.numel() * 4


def test_memory_lifecycle():
    before = held()
    t = torch.empty(1000, device="toychip")
    assert held() >= before + 4000
    del t
    assert held() == before
    assert torch.empty(1000, device="toychip").device.type == "toychip"


def test_tensor_copy_operations():
    cpu = torch.randn(100)
    chip = cpu.to("toychip")
    assert chip.device.type == "toychip" and chip.shape == cpu.shape
    assert torch.equal(chip.to("cpu"), cpu)
    copied = chip.clone()
    assert copied.device.type == "toychip" and copied.data_ptr() != chip.data_ptr()
    assert torch.equal(copied.cpu(), cpu)


def test_inplace_operations():
    t = torch.ones(100, device="toychip")
    address = t.data_ptr()
    t.add_(1)
    assert t.data_ptr() == address and bool((t == 2).all())
    t.mul_(2)
    assert t.data_ptr() == address and bool((t == 4).all())


def test_view_operations():
    t = torch.randn(100, device="toychip")
    square = t.view(10, 10)
    assert square.data_ptr() == t.data_ptr() and square.shape == (10, 10)
    part = t[10:20]
    assert part.numel() == 10 and part.untyped_storage().data_ptr() == t.untyped_storage().data_ptr()
    assert part.data_ptr() == t.data_ptr() + 10 * t.element_size()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int32, torch.int64])
def test_different_dtypes(dtype):
    t = torch.empty(100, dtype=dtype, device="toychip")
    assert t.device.type == "toychip" and t.dtype == dtype and t.numel() == 100
    assert t.untyped_storage().nbytes() == 100 * t.element_size()


def test_tensor_resize():
    t = torch.arange(100, dtype=torch.float32).to("toychip")
    address = t.data_ptr()
    t.resize_(50)
    assert t.numel() == 50 and t.data_ptr() == address  # shrinking keeps the memory
    t.resize_(100)
    assert t.numel() == 100
    assert torch.equal(t[:50].cpu(), torch.arange(50, dtype=torch.float32))


def test_empty_cache_operation():
    x, y = torch.empty(1000, device="toychip"), torch.empty(2000, device="toychip")
    del x, y
    gc.collect()
    torch.toychip.empty_cache()
    assert torch.toychip.memory_reserved(0) >= torch.toychip.memory_allocated(0)


@pytest.mark.parametrize("memory_format, shape", [(torch.channels_last, (2, 3, 4, 4)),
                                                  (torch.channels_last_3d, (2, 3, 2, 4, 4)),
                                                  (torch.contiguous_format, (2, 3, 4, 4))])
def test_memory_format_allocation(memory_format, shape):
    t = torch.empty(shape, device="toychip", memory_format=memory_format)
    assert t.device.type == "toychip" and t.is_contiguous(memory_format=memory_format)
    assert t.stride() == torch.empty(shape, memory_format=memory_format).stride()


def test_large_allocation():
    numel = 2 * 1024 * 1024 // 4  # 2 MB (upstream: 10 MB)
    t = torch.empty(numel, device="toychip")
    assert t.numel() == numel and t.untyped_storage().nbytes() == numel * 4


def test_sequential_allocations_and_deallocations():
    before = held()
    for i in range(10):
        t = torch.empty(1000 + 100 * i, device="toychip")
        assert t.device.type == "toychip"
        del t
    assert held() == before


def test_allocation_with_requires_grad():
    for make in (torch.empty, torch.randn):
        t = make(100, device="toychip", requires_grad=True)
        assert t.device.type == "toychip" and t.requires_grad and t.is_leaf


def test_storage_operations():
    t = torch.randn(100, device="toychip")
    storage = t.untyped_storage()
    assert storage.device.type == "toychip"
    assert storage.nbytes() >= t.numel() * t.element_size()


def test_tensor_from_blob():
    t = torch.randn(100, device="toychip")
    same = t.view_as(t)
    assert same.data_ptr() == t.data_ptr()
    t.fill_(5.0)
    assert bool((same == 5.0).all())


# ----------------------------------------------------------------- TestMemoryLeaks
def assert_no_leak(cycle, times: int):
    """Run ``cycle`` ``times`` times: the chip holds no more bytes afterwards than before."""
    cycle()  # a first run may fill caches that stay (e.g. autograd's)
    before = held()
    for _ in range(times):
        cycle()
    assert held() == before


def test_no_leak_simple_allocations():
    assert_no_leak(lambda: torch.empty(1000, device="toychip"), 200)


def test_no_leak_varying_sizes():
    sizes = iter([100, 500, 1000, 5000, 10000] * 20)
    assert_no_leak(lambda: torch.empty(next(sizes), device="toychip"), 99)


def test_no_leak_with_copies():
    def cycle():
        t = torch.randn(500, device="toychip")
        t.cpu().to("toychip").clone()
    assert_no_leak(cycle, 50)


def test_no_leak_with_views():
    def cycle():
        t = torch.randn(1000, device="toychip")
        return t.view(10, 100), t[100:200], t.reshape(20, 50)
    assert_no_leak(cycle, 50)


def test_no_leak_inplace_operations():
    def cycle():
        torch.ones(1000, device="toychip").add_(1).mul_(2).div_(2).sub_(1)
    assert_no_leak(cycle, 50)


def test_no_leak_with_gradients():
    def cycle():
        x = torch.randn(100, device="toychip", requires_grad=True)
        y = torch.randn(100, device="toychip", requires_grad=True)
        (x + y).sum().backward()
    assert_no_leak(cycle, 30)


def test_no_leak_repeated_large_allocations():
    numel = 4 * 1024 * 1024 // 4  # 4 MB (upstream: 50 MB)
    assert_no_leak(lambda: torch.empty(numel, device="toychip"), 10)


def test_leak_detection_with_statistics():
    before = held()
    for _ in range(3):
        tensors = [torch.empty(1000, device="toychip") for _ in range(100)]
        assert held() >= before + 100 * 4000
        tensors.clear()
        assert held() == before
    assert torch.empty(10000, device="toychip").device.type == "toychip"


# ----------------------------------------------------------------- TestPinMemory
def test_pin_memory():
    t = torch.randn(10)
    assert not t.is_pinned()
    pinned = t.pin_memory()
    assert pinned.is_pinned() and pinned[2:5].is_pinned()
    assert torch.equal(pinned, t)
    for storage in (torch.randn(10).storage(), torch.randn(10).untyped_storage()):
        assert not storage.is_pinned("toychip")
        assert storage.pin_memory("toychip").is_pinned("toychip")


def test_pin_memory_different_devices():
    t = torch.randn(10)
    assert t.pin_memory().is_pinned()
    assert t.pin_memory("toychip").is_pinned("toychip")


def test_pin_memory_view():
    pinned = torch.randn(20).pin_memory()
    for view in (pinned[2:5], pinned[::2], pinned.view(4, 5)):
        assert view.is_pinned()


def test_pin_memory_storage_sharing():
    pinned = torch.randn(10).pin_memory()
    shared = torch.tensor((), dtype=torch.float32).set_(pinned.untyped_storage())
    assert shared.is_pinned() and shared.data_ptr() == pinned.data_ptr()


# ----------------------------------------------------------------- TestMultiDeviceAllocation
def test_allocation_on_device_1():
    torch.toychip.set_device(1)
    t = torch.empty(100, device="toychip:1")
    assert t.device == torch.device("toychip:1")
    assert torch.empty(100, device="toychip").device.index == 1  # the current chip


def test_simultaneous_device_allocations():
    x = torch.empty(100, device="toychip:0")
    y = torch.empty(200, device="toychip:1")
    assert (x.device.index, y.device.index) == (0, 1)
    assert x.data_ptr() != y.data_ptr()


def test_memory_isolation_between_devices():
    before = held(0), held(1)
    on_0 = [torch.empty(1000, device="toychip:0") for _ in range(10)]
    on_1 = [torch.empty(1000, device="toychip:1") for _ in range(10)]
    assert {t.device.index for t in on_0} == {0} and {t.device.index for t in on_1} == {1}
    assert not {t.data_ptr() for t in on_0} & {t.data_ptr() for t in on_1}
    assert held(1) - before[1] == held(0) - before[0] >= 10 * 4000  # each chip books its own


def test_alternating_device_allocations():
    tensors = [torch.empty(100 + i, device=f"toychip:{i % 2}") for i in range(20)]
    assert [t.device.index for t in tensors] == [i % 2 for i in range(20)]


# ----------------------------------------------------------------- TestCrossDeviceOperations
def test_tensor_to_different_device():
    x = torch.randn(100, device="toychip:0")
    y = x.to("toychip:1")
    assert y.device.index == 1 and y.data_ptr() != x.data_ptr()
    assert torch.equal(x.cpu(), y.cpu())


def test_bidirectional_device_transfer():
    original = torch.randn(100, device="toychip:0")
    there = original.to("toychip:1")
    back = there.to("toychip:0")
    assert (there.device.index, back.device.index) == (1, 0)
    assert torch.equal(back.cpu(), original.cpu())
