"""Does torch.toychip do what a CUDA user does with torch.cuda, item by item?

The porting issue listed 27 things a CUDA user does with a device; each is one case
here. What the chip's C++ runtime adds (a second chip, torch.accelerator reaching its
device guard and allocator) is pinned at the end.
"""
import io

import pytest
import torch
import torch.nn as nn

import toychip

tc = torch.toychip


def _round_trip(obj, **load_kwargs):
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    buffer.seek(0)
    return torch.load(buffer, **load_kwargs)


def is_available():
    assert tc.is_available()
    torch.ones(1, device="toychip")  # as torch.cuda: initialised by its first tensor, if not before
    assert tc.is_initialized()


def device_count():
    assert tc.device_count() == toychip.DEFAULT_SPEC.device_count == 2


def current_device():
    assert tc.current_device() == 0


def set_device():
    tc.set_device(0)
    with tc.device(0):
        assert tc.current_device() == 0


def get_rng_state():
    state = tc.get_rng_state()
    torch.randn(4, device="toychip")
    assert state.dtype == torch.uint8 and state.device.type == "cpu"
    assert not torch.equal(tc.get_rng_state(), state)    # drawing numbers moved it


def set_rng_state():
    state = tc.get_rng_state()
    first = torch.randn(4, device="toychip").cpu()
    tc.set_rng_state(state)
    assert torch.equal(torch.randn(4, device="toychip").cpu(), first)


def manual_seed():
    tc.manual_seed(5)
    first = torch.rand(3, device="toychip").cpu()
    tc.manual_seed(5)
    assert torch.equal(torch.rand(3, device="toychip").cpu(), first)


def memory_allocated():
    before = tc.memory_allocated()
    x = torch.ones(1024, device="toychip")
    assert tc.memory_allocated() - before == 4096
    del x


def max_memory_allocated():
    x = torch.ones(1024, device="toychip")
    assert tc.max_memory_allocated() >= tc.memory_allocated() > 0
    del x


def reset_peak_memory_stats():
    tc.reset_peak_memory_stats()
    assert tc.max_memory_allocated() == tc.memory_allocated()


def memory_stats():
    stats = tc.memory_stats()
    assert stats["allocated_bytes.all.current"] == tc.memory_allocated()
    assert stats["reserved_bytes.all.current"] == tc.memory_reserved()


def empty_cache():
    x = torch.ones(3000, device="toychip")
    del x
    tc.empty_cache()
    assert tc.memory_reserved() == tc.memory_allocated()


def stream():
    side = tc.Stream()
    with tc.stream(side):
        assert tc.current_stream() == side
    assert tc.current_stream() == tc.default_stream()
    side.synchronize()


def event():
    start, end = tc.Event(enable_timing=True), tc.Event(enable_timing=True)
    x = torch.ones(1000, device="toychip")
    with toychip.profile() as p:
        start.record()
        x.exp()
        end.record()
    end.synchronize()
    assert start.elapsed_time(end) == pytest.approx(p.time_us / 1000)


def current_stream():
    assert isinstance(tc.current_stream(), tc.Stream) and tc.current_stream().stream_id == 0


def synchronize():
    tc.synchronize()
    tc.synchronize("toychip:0")


def dtype_tensor(dtype):
    def check():
        x = torch.tensor([1, 2, 3], dtype=dtype).to("toychip")
        assert (x + x).cpu().tolist() == [2, 4, 6] and (x + x).dtype == dtype
    return check


def autocast_bfloat16():
    a, b = torch.randn(4, 8, device="toychip"), torch.randn(8, 2, device="toychip")
    with torch.autocast("toychip", dtype=torch.bfloat16):
        y = a @ b
    assert y.dtype == torch.bfloat16


def save_and_load():
    x = torch.arange(6.0, device="toychip").reshape(2, 3)
    loaded = _round_trip({"x": x, "p": nn.Parameter(torch.ones(2, device="toychip"))}, weights_only=False)
    assert loaded["x"].device.type == "toychip" and torch.equal(loaded["x"].cpu(), x.cpu())
    assert isinstance(loaded["p"], nn.Parameter) and loaded["p"].device.type == "toychip"


def load_with_map_location():
    chip_model, cpu_model = nn.Linear(3, 2).to("toychip"), nn.Linear(3, 2)
    on_cpu = _round_trip(chip_model.state_dict(), map_location="cpu")
    assert all(v.device.type == "cpu" for v in on_cpu.values())
    on_chip = _round_trip(cpu_model.state_dict(), map_location="toychip")
    assert all(v.device.type == "toychip" for v in on_chip.values())
    assert torch.equal(on_chip["weight"].cpu(), cpu_model.weight.detach())


def tensor_toychip_method():
    x = torch.ones(2).toychip()
    assert x.is_toychip and nn.Linear(2, 2).toychip().weight.is_toychip


def accelerator_current_accelerator():
    assert torch.accelerator.is_available()
    assert torch.accelerator.current_accelerator() == torch.device("toychip")


def accelerator_device_count():
    assert torch.accelerator.device_count() == 2


def accelerator_device_index():
    torch.accelerator.set_device_index(0)
    assert torch.accelerator.current_device_index() == 0


CUDA_USER_ITEMS = {
    "is_available": is_available,
    "device_count": device_count,
    "current_device": current_device,
    "set_device": set_device,
    "get_rng_state": get_rng_state,
    "set_rng_state": set_rng_state,
    "manual_seed": manual_seed,
    "memory_allocated": memory_allocated,
    "max_memory_allocated": max_memory_allocated,
    "reset_peak_memory_stats": reset_peak_memory_stats,
    "memory_stats": memory_stats,
    "empty_cache": empty_cache,
    "Stream": stream,
    "Event": event,
    "current_stream": current_stream,
    "synchronize": synchronize,
    "float16_tensor": dtype_tensor(torch.float16),
    "bfloat16_tensor": dtype_tensor(torch.bfloat16),
    "uint8_tensor": dtype_tensor(torch.uint8),
    "int8_tensor": dtype_tensor(torch.int8),
    "autocast_bfloat16": autocast_bfloat16,
    "torch.save+torch.load": save_and_load,
    "torch.load_map_location": load_with_map_location,
    "Tensor.toychip": tensor_toychip_method,
    "accelerator.current_accelerator": accelerator_current_accelerator,
    "accelerator.device_count": accelerator_device_count,
    "accelerator.device_index": accelerator_device_index,
}


def test_the_list_has_the_issues_27_items():
    assert len(CUDA_USER_ITEMS) == 27


@pytest.mark.parametrize("check", CUDA_USER_ITEMS.values(), ids=CUDA_USER_ITEMS.keys())
def test_what_a_cuda_user_does_works_on_the_chip(check):
    check()


def test_a_second_chip_holds_tensors_and_results_stay_on_it():
    x = torch.ones(4, device="toychip:1")
    with tc.device(1):
        assert tc.current_device() == 1 and torch.empty(2, device="toychip").device == torch.device("toychip:1")
    assert tc.current_device() == 0
    assert (x * 2).device == x.device == torch.device("toychip:1") and x.data_ptr() != 0
    with pytest.raises(RuntimeError, match="out of range"):
        tc.set_device(2)


def test_torch_accelerator_reaches_the_chips_device_guard_and_allocator():
    """torch.accelerator's synchronize and memory functions call the C++ device guard and
    allocator; the runtime's allocator reports the caching allocator's (simulated) numbers."""
    torch.accelerator.synchronize()
    x = torch.ones(1024, device="toychip")
    assert torch.accelerator.memory_allocated() == tc.memory_allocated() > 0
    del x
