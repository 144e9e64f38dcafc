"""Does the C++ runtime do what a C++ backend does for PyTorch (OpenReg, torch_npu)?

Devices and their errors, streams and events through torch.Stream/torch.Event (times from
Python hooks), generators, pinned memory, device memory with real pointers, buffers that
alias it, resize_, and torch.accelerator's memory statistics.
"""
import gc
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

import toychip  # noqa: F401 -- registers the chip
from toychip import runtime as rt

CHIP = "toychip"


@pytest.fixture
def event_log():
    """Event hooks that log every call; elapsed is end - start in ms. Restored afterwards."""
    saved, log = rt.event_hooks(), []
    rt.set_event_hooks(lambda *a: log.append(("record", *a)), lambda *a: log.append(("block", *a)),
                       lambda start, end: float(end - start), lambda *a: log.append(("destroy", *a)))
    yield log
    rt.set_event_hooks(*saved)


@pytest.fixture
def no_event_hooks():
    saved = rt.event_hooks()
    rt.set_event_hooks(None, None, None, None)
    yield
    rt.set_event_hooks(*saved)


@pytest.fixture
def no_memory_hooks():
    saved = rt.memory_hooks()
    rt.set_memory_hooks(None, None, None, None)
    yield
    rt.set_memory_hooks(*saved)


# ---------------------------------------------------------------- devices
def test_the_chip_has_two_devices_everywhere():
    assert rt.device_count() == 2
    assert torch.accelerator.device_count() == 2 and torch.toychip.device_count() == 2
    assert torch.accelerator.current_accelerator() == torch.device(CHIP)
    assert torch.accelerator.is_available()


@pytest.mark.parametrize("select", [
    lambda: rt.set_device(2),
    lambda: torch.accelerator.set_device_index(2),
    lambda: rt.empty_strided((2,), (1,), torch.float32, 2),
    lambda: torch.Stream(device="toychip:2"),
])
def test_device_index_two_is_a_clear_error(select):
    with pytest.raises(RuntimeError, match=r"The device index is out of range: toychip:2 does not exist; the chip has 2 devices \(toychip:0 … toychip:1\)"):
        select()


def test_the_current_device_is_per_thread_and_restored_by_guards():
    import threading

    assert rt.current_device() == 0
    with torch.toychip.device(1):
        assert rt.current_device() == 1 and torch.accelerator.current_device_index() == 1
        seen = []
        thread = threading.Thread(target=lambda: seen.append(rt.current_device()))
        thread.start()
        thread.join()
        assert seen == [0]  # a new thread starts on device 0
    assert rt.current_device() == 0
    with torch.accelerator.device_index(1):
        assert rt.current_device() == 1
    assert rt.exchange_device(1) == 0 and rt.exchange_device(0) == 1


def test_the_device_count_is_fixed_once_tensors_exist():
    rt.empty_strided((1,), (1,), torch.float32, 0)
    with pytest.raises(RuntimeError, match="too late"):
        rt.set_device_count(3)
    rt.set_device_count(2)  # the same count is fine


# ---------------------------------------------------------------- streams and events
def test_streams_round_trip_through_torch_stream():
    default = torch.accelerator.current_stream()
    assert default.stream_id == 0 and default.device == torch.device("toychip:0")
    side, other = torch.Stream(device=CHIP), torch.Stream(device=CHIP)
    assert side.device.type == CHIP and 0 != side.stream_id != other.stream_id
    with side:
        assert torch.accelerator.current_stream() == side and rt.current_stream_id(0) == side.stream_id
    assert torch.accelerator.current_stream() == default and rt.current_stream_id(0) == 0
    torch.accelerator.set_stream(other)
    try:
        assert rt.current_stream_id(0) == other.stream_id
    finally:
        torch.accelerator.set_stream(default)
    assert side.query() and side.synchronize() is None
    torch.accelerator.synchronize()
    torch.accelerator.synchronize(1)


def test_a_stream_on_device_one():
    stream = torch.Stream(device="toychip:1")
    assert stream.device == torch.device("toychip:1")
    with stream:
        assert rt.current_stream_id(1) == stream.stream_id and rt.current_stream_id(0) == 0


def test_events_call_the_clock_hooks(event_log):
    side = torch.Stream(device=CHIP)
    start, end = torch.Event(device=CHIP, enable_timing=True), torch.Event(device=CHIP, enable_timing=True)
    start.record()
    end.record(side)
    assert event_log[0][:1] == ("record",) and event_log[0][2:] == (0, 0)
    assert event_log[1][2:] == (0, side.stream_id)
    start_id, end_id = event_log[0][1], event_log[1][1]
    assert 0 < start_id < end_id
    assert start.elapsed_time(end) == float(end_id - start_id)  # what the elapsed hook said
    end.wait(torch.accelerator.current_stream())
    assert event_log[2] == ("block", end_id, 0, 0)
    assert start.query() and end.synchronize() is None
    del start, end
    gc.collect()
    assert {entry for entry in event_log if entry[0] == "destroy"} == {("destroy", start_id), ("destroy", end_id)}


def test_wait_stream_records_on_one_stream_and_blocks_the_other(event_log):
    side = torch.Stream(device=CHIP)
    torch.accelerator.current_stream().wait_stream(side)
    kinds = [(entry[0], entry[-1]) for entry in event_log if entry[0] != "destroy"]
    assert kinds == [("record", side.stream_id), ("block", 0)]


def test_elapsed_time_without_the_clock_is_a_clear_error(no_event_hooks):
    start, end = torch.Event(device=CHIP, enable_timing=True), torch.Event(device=CHIP, enable_timing=True)
    start.record()
    end.record()  # no hook: recording does nothing, and is no error
    with pytest.raises(RuntimeError, match="record both events"):
        start.elapsed_time(end)


def test_events_alive_at_exit_do_not_call_python_after_it_is_gone():
    code = textwrap.dedent("""
        import torch, toychip
        from toychip import runtime as rt
        rt.set_event_hooks(lambda *a: None, lambda *a: None, lambda s, e: 1.0, lambda e: print("destroyed", e))
        KEEP = [torch.Event(device="toychip", enable_timing=True) for _ in range(3)]
        for event in KEEP:
            event.record()
        x = torch.randn(8, device="toychip")
        x.requires_grad_()
        (x * x).sum().backward()
        print("done")
        """)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert result.returncode == 0, result.stderr
    assert "done" in result.stdout


# ---------------------------------------------------------------- generators
def test_torch_generator_on_the_chip_is_deterministic():
    first, second = torch.Generator(CHIP), torch.Generator(device="toychip:1")
    assert first.device == torch.device("toychip:0") and second.device == torch.device("toychip:1")
    first.manual_seed(5)
    second.manual_seed(5)
    draws = [rt.draw_seed(first, 0) for _ in range(3)]
    assert draws == [rt.draw_seed(second, 1) for _ in range(3)]
    assert len(set(draws)) == 3 and all(0 <= d < 2 ** 63 for d in draws)
    assert first.initial_seed() == 5


def test_generator_state_round_trips():
    gen = torch.Generator(CHIP).manual_seed(11)
    state = gen.get_state()
    assert state.dtype == torch.uint8 and state.device.type == "cpu"
    expected = rt.draw_seed(gen, 0)
    gen.set_state(state)
    assert rt.draw_seed(gen, 0) == expected
    clone = gen.clone_state()
    assert clone.device == torch.device("toychip:0") and rt.draw_seed(clone, 0) == rt.draw_seed(gen, 0)


def test_default_generators_are_one_per_device_and_feed_the_kernels():
    assert rt.default_generator(0) is rt.default_generator(0)
    assert rt.default_generator(1).device == torch.device("toychip:1")
    torch.toychip.manual_seed_all(3)
    assert rt.draw_seed(None, 0) == rt.draw_seed(None, 1)
    torch.toychip.manual_seed(4)
    first = torch.randn(5, device=CHIP).cpu()
    torch.toychip.manual_seed(4)
    assert torch.equal(torch.randn(5, device=CHIP).cpu(), first)
    gen = torch.Generator(CHIP).manual_seed(4)
    assert torch.equal(torch.randn(5, device=CHIP, generator=gen).cpu(), first)  # same seed, same numbers
    with pytest.raises(RuntimeError, match="toychip generator"):
        rt.draw_seed(torch.Generator(), 0)


def test_rng_state_of_the_device_module_round_trips():
    state = torch.toychip.get_rng_state()
    first = torch.rand(4, device=CHIP).cpu()
    assert not torch.equal(torch.toychip.get_rng_state(), state)
    torch.toychip.set_rng_state(state)
    assert torch.equal(torch.rand(4, device=CHIP).cpu(), first)


# ---------------------------------------------------------------- pinned memory
def test_pinned_memory_with_the_chip_as_the_accelerator():
    pinned = torch.empty(4, pin_memory=True)
    assert pinned.is_pinned() and pinned[1:].is_pinned()  # a view's pointer is inside the block
    assert torch.arange(3.0).pin_memory().is_pinned()
    assert not torch.arange(3.0).is_pinned()
    copied = torch.arange(6.0).pin_memory()
    assert torch.equal(copied, torch.arange(6.0)) and copied.device.type == "cpu"


# ---------------------------------------------------------------- device memory
def test_empty_strided_on_device_one_has_real_distinct_memory():
    a = rt.empty_strided((2, 3), (3, 1), torch.float32, 1)
    b = rt.empty_strided((2, 3), (1, 2), torch.float64, 1)
    assert a.device == torch.device("toychip:1") == b.device
    assert a.shape == (2, 3) and a.stride() == (3, 1) and b.stride() == (1, 2)
    assert a.data_ptr() != 0 and b.data_ptr() != 0 and a.data_ptr() != b.data_ptr()
    assert a.data_ptr() % 64 == 0
    assert a.untyped_storage().nbytes() == 24 and b.untyped_storage().nbytes() == 48
    assert rt.device_of(a.data_ptr()) == 1 == rt.device_of(a.data_ptr() + 23)
    assert rt.device_of(torch.zeros(4).data_ptr()) is None
    assert "PrivateUse1" in str(torch._C._dispatch_keys(a)) and "AutogradPrivateUse1" in str(torch._C._dispatch_keys(a))


def test_empty_strided_of_nothing_has_no_memory_but_a_device():
    empty = rt.empty_strided((0, 4), (4, 1), torch.float32, 1)
    assert empty.data_ptr() == 0 and empty.device == torch.device("toychip:1")
    assert rt.buffer(empty.untyped_storage()).shape == (0,)


def test_buffer_aliases_the_storage_s_bytes():
    t = rt.empty_strided((4,), (1,), torch.int32, 0)
    storage = t.untyped_storage()
    view = rt.buffer(storage)
    assert view.dtype == np.uint8 and view.shape == (16,) and not view.flags.owndata and view.base is None
    view.view(np.int32)[:] = [1, 2, 3, 4]
    again = rt.buffer(t.untyped_storage())
    assert again.ctypes.data == t.data_ptr()
    assert list(again.view(np.int32)) == [1, 2, 3, 4]
    with pytest.raises(TypeError, match="UntypedStorage"):
        rt.buffer(t)


def test_adopt_makes_an_array_the_memory_of_a_tensor_without_a_copy():
    array = np.arange(6, dtype=np.float32).reshape(2, 3)
    address, refs = array.ctypes.data, sys.getrefcount(array)
    t = rt.adopt(array, torch.float32, 1)
    assert t.device == torch.device("toychip:1") and t.shape == (2, 3) and t.data_ptr() == address
    assert sys.getrefcount(array) == refs + 1                    # the storage holds the array
    del t
    gc.collect()
    assert sys.getrefcount(array) == refs                        # ... and lets go of it with the storage
    with pytest.raises(ValueError, match="C-contiguous"):
        rt.adopt(array.T, torch.float32, 0)
    with pytest.raises(ValueError, match="cannot hold"):
        rt.adopt(array, torch.float64, 0)


def test_adopt_into_replaces_a_storage_s_memory():
    t = rt.empty_strided((3,), (1,), torch.int64, 0)
    fresh = np.array([7, 8, 9], dtype=np.int64)
    rt.adopt_into(t.untyped_storage(), fresh)
    assert t.data_ptr() == fresh.ctypes.data and t.untyped_storage().nbytes() == fresh.nbytes
    fresh[0] = 70
    assert list(rt.buffer(t.untyped_storage()).view(np.int64)) == [70, 8, 9]


def test_untyped_storage_on_the_chip():
    storage = torch.UntypedStorage(4, device=CHIP)
    assert storage.device == torch.device("toychip:0") and storage.nbytes() == 4 and storage.data_ptr() != 0
    assert torch.UntypedStorage(8, device="toychip:1").device == torch.device("toychip:1")


@pytest.mark.parametrize("resize", [lambda s, n: s.resize_(n), rt.resize_storage_bytes])
def test_resize_keeps_the_bytes(resize):
    t = rt.empty_strided((6,), (1,), torch.uint8, 1)
    storage = t.untyped_storage()
    rt.buffer(storage)[:] = np.arange(6, dtype=np.uint8)
    resize(storage, 10)
    assert storage.nbytes() == 10 and storage.device == torch.device("toychip:1")
    assert list(rt.buffer(storage)[:6]) == [0, 1, 2, 3, 4, 5]
    resize(storage, 3)
    assert list(rt.buffer(storage)) == [0, 1, 2]


def test_the_real_counters_follow_allocations(no_memory_hooks):
    before = rt.device_memory_stats(1)
    t = rt.empty_strided((100,), (1,), torch.float32, 1)
    after = rt.device_memory_stats(1)
    assert after["allocated_bytes.all.current"] - before["allocated_bytes.all.current"] == 400
    assert after["allocation.all.current"] - before["allocation.all.current"] == 1
    assert after["num_device_alloc"] - before["num_device_alloc"] == 1
    assert torch.accelerator.memory_allocated(1) == after["allocated_bytes.all.current"]
    del t
    assert rt.device_memory_stats(1)["allocated_bytes.all.current"] == before["allocated_bytes.all.current"]
    torch.accelerator.reset_peak_memory_stats(1)
    assert rt.device_memory_stats(1)["allocated_bytes.all.peak"] == before["allocated_bytes.all.current"]


def test_memory_hooks_forward_torch_accelerator_s_calls():
    saved, calls = rt.memory_hooks(), []
    stats = {"allocated_bytes.all.current": 512, "allocated_bytes.all.peak": 1024,
             "reserved_bytes.all.current": 2048, "num_device_alloc": 3}
    rt.set_memory_hooks(lambda device: calls.append(("stats", device)) or stats,
                        lambda device: calls.append(("reset_peak", device)),
                        lambda device: calls.append(("reset_accumulated", device)),
                        lambda: calls.append(("empty_cache",)))
    try:
        assert torch.accelerator.memory_allocated(1) == 512
        assert torch.accelerator.max_memory_allocated(1) == 1024
        assert torch.accelerator.memory_reserved(0) == 2048
        assert torch.accelerator.memory_stats(0)["num_device_alloc"] == 3
        torch.accelerator.reset_peak_memory_stats(1)
        torch.accelerator.reset_accumulated_memory_stats(0)
        torch.accelerator.empty_cache()
        assert rt.allocator_stats(0)["reserved_bytes.all.current"] == 2048
    finally:
        rt.set_memory_hooks(*saved)
    assert ("stats", 1) in calls and ("stats", 0) in calls
    assert [c for c in calls if c[0] != "stats"] == [("reset_peak", 1), ("reset_accumulated", 0), ("empty_cache",)]


def test_empty_strided_checks_its_arguments():
    with pytest.raises(RuntimeError, match="negative"):
        rt.empty_strided((-1,), (1,), torch.float32, 0)
    with pytest.raises(ValueError, match="2 sizes but 1 strides"):
        rt.empty_strided((2, 2), (1,), torch.float32, 0)


# ---------------------------------------------------------------- backend metadata
def test_backend_metadata_is_the_flags_set_last_and_detach_keeps_them():
    x = torch.empty(2, device="toychip")
    torch._utils.set_tensor_metadata(x, {"packed": True, "tiled": False})
    assert torch._utils.get_tensor_metadata(x.detach()) == {"packed": True, "tiled": False}
    torch._utils.set_tensor_metadata(x, {"tiled": True})
    assert torch._utils.get_tensor_metadata(x) == {"tiled": True}
    torch._utils.set_tensor_metadata(x, {})
    assert torch._utils.get_tensor_metadata(x) == {}
    assert torch._utils.get_tensor_metadata(torch.empty(2, device="toychip")) == {}
