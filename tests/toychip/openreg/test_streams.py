"""Mirrors OpenReg's tests/test_streams.py: torch.Stream on the chip through torch.accelerator.

The streams are the chip's C++ device guard's (toychip.runtime): a current stream per thread
and device, stream 0 the default. The chip computes synchronously, so a stream is never busy.
"""
import pytest
import torch

import toychip  # noqa: F401  (registers the chip)

DEVICES = (0, 1)


@pytest.fixture(autouse=True)
def restore_current_streams():
    """The tests select streams and devices; later tests expect the defaults again."""
    device = torch.accelerator.current_device_index()
    streams = [torch.accelerator.current_stream(index) for index in DEVICES]
    yield
    for stream in streams:
        torch.accelerator.set_stream(stream)
    torch.accelerator.set_device_index(device)


def test_stream_create():
    assert torch.Stream(device="toychip").device_index == torch.toychip.current_device()
    for stream in (torch.Stream(device="toychip:1"), torch.Stream(1)):
        assert (stream.device.type, stream.device_index) == ("toychip", 1)
    same = torch.Stream(stream_id=stream.stream_id, device_type=stream.device_type, device_index=stream.device_index)
    assert same == stream


def test_stream_context():
    with torch.Stream(device="toychip:1") as stream:
        assert torch.accelerator.current_stream() == stream


def test_stream_context_exception_restore():
    before = torch.accelerator.current_stream()
    inner = torch.Stream(device="toychip:1")
    with pytest.raises(RuntimeError, match="raised inside"):
        with inner:
            assert torch.accelerator.current_stream() == inner
            raise RuntimeError("raised inside the stream's block")
    assert torch.accelerator.current_stream() == before


def test_stream_switch():
    on_0 = torch.Stream(device="toychip:0")
    torch.accelerator.set_stream(on_0)
    assert torch.accelerator.current_stream() == on_0
    on_1 = torch.Stream(device="toychip:1")
    assert torch.accelerator.current_stream() == on_0  # making a stream does not select it
    torch.accelerator.set_stream(on_1)
    assert torch.accelerator.current_stream() == on_1


def test_stream_synchronize():
    stream = torch.Stream(device="toychip:1")
    assert stream.query()
    torch.Event().record(stream)
    stream.synchronize()
    assert stream.query()


def test_stream_repr():
    assert "torch.Stream device_type=toychip, device_index=1" in repr(torch.Stream(device="toychip:1"))


def test_stream_wait_stream():
    on_0, on_1 = torch.Stream(device="toychip:0"), torch.Stream(device="toychip:1")
    x = torch.ones(1000, device="toychip:0")
    with toychip.profile() as p:
        with on_0:
            x.exp()
        on_1.wait_stream(on_0)  # across chips: chip 1's stream waits for chip 0's work
    assert p.stream_us[1, on_1.stream_id] == p.stream_us[0, on_0.stream_id] > 0


def test_stream_wait_event():
    first, second = torch.Stream(device="toychip"), torch.Stream(device="toychip")
    second.wait_event(first.record_event())
    assert second.query()


def test_stream_equality():
    first, second = torch.Stream(device="toychip:0"), torch.Stream(device="toychip:0")
    assert first != second and first == first
    rebuilt = torch.Stream(stream_id=first.stream_id, device_type=first.device_type, device_index=first.device_index)
    assert rebuilt == first


def test_stream_multiple_devices():
    streams = [torch.Stream(device=f"toychip:{index}") for index in DEVICES]
    assert [s.device_index for s in streams] == list(DEVICES)
    for index, stream in zip(DEVICES, streams):
        torch.accelerator.set_device_index(index)
        torch.accelerator.set_stream(stream)
        assert torch.accelerator.current_stream() == stream


def test_stream_context_nested():
    outer, inner = torch.Stream(device="toychip:0"), torch.Stream(device="toychip:0")
    with outer:
        assert torch.accelerator.current_stream() == outer
        with inner:
            assert torch.accelerator.current_stream() == inner
        assert torch.accelerator.current_stream() == outer


def test_stream_record_event():
    stream = torch.Stream(device="toychip")
    event = stream.record_event()
    assert event is not None and event.device.type == "toychip"
    stream.synchronize()
    assert event.query()
