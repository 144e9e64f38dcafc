"""Mirrors OpenReg's tests/test_event.py: torch.Event on the chip's streams, its ids, waits and times.

The chip computes synchronously, so an event is complete as soon as it is recorded; its
times come from the simulated clock (toychip.streams): outside a profile, the chips' own
clock, on which recording an event takes ``ChipSpec.event_us``.
"""
import pytest
import torch

import toychip


def test_event_create():
    for device in ("toychip", "toychip:1", None):
        event = torch.Event() if device is None else torch.Event(device=device)
        # an event takes its device index when it is first recorded, and its id with it
        assert (event.device.type, event.device.index, event.event_id) == ("toychip", None, 0)
    event = torch.Stream(device="toychip:1").record_event()
    assert (event.device.type, event.device.index) == ("toychip", 1)
    assert event.event_id != 0


def test_event_query():
    assert torch.Event().query()  # never recorded: nothing to wait for
    event = torch.Stream(device="toychip:1").record_event()
    event.synchronize()
    assert event.query()


def test_event_record():
    stream = torch.Stream(device="toychip:1")
    first, second = stream.record_event(), stream.record_event()
    assert 0 not in (first.event_id, second.event_id)
    assert first.event_id != second.event_id


def test_event_elapsed_time():
    stream = torch.Stream(device="toychip:1")
    first = torch.Event(device="toychip:1", enable_timing=True)
    second = torch.Event(device="toychip:1", enable_timing=True)
    first.record(stream)
    second.record(stream)  # back to back, no profile open
    stream.synchronize()
    assert first.query() and second.query()
    elapsed = first.elapsed_time(second)
    assert elapsed > 0
    assert elapsed == pytest.approx(toychip.DEFAULT_SPEC.event_us / 1000)  # milliseconds


def test_event_wait_stream():
    producer, consumer = torch.Stream(device="toychip"), torch.Stream(device="toychip")
    x = torch.ones(1000, device="toychip")
    with toychip.profile() as p:
        with producer:
            x.exp()
        consumer.wait_event(producer.record_event())
    chip = producer.device_index
    assert p.stream_us[chip, consumer.stream_id] == p.stream_us[chip, producer.stream_id] > 0


def test_event_synchronize():
    event = torch.Event(device="toychip")
    assert event.query()
    event.record(torch.Stream(device="toychip"))
    event.synchronize()
    assert event.query() and event.event_id != 0


def test_event_different_devices():
    first, second = torch.Event(device="toychip:0"), torch.Event(device="toychip:1")
    first.record(torch.Stream(device="toychip:0"))
    second.record(torch.Stream(device="toychip:1"))
    assert (first.device.index, second.device.index) == (0, 1)


def test_event_timing_disabled():
    stream = torch.Stream(device="toychip:1")
    first, second = torch.Event(device="toychip:1"), torch.Event(device="toychip:1", enable_timing=False)
    first.record(stream)
    second.record(stream)
    stream.synchronize()
    with pytest.raises(ValueError, match="Both events must be created with argument 'enable_timing=True'"):
        first.elapsed_time(second)


def test_event_wait_event():
    producer, consumer = torch.Stream(device="toychip"), torch.Stream(device="toychip")
    event = producer.record_event()
    consumer.wait_event(event)
    consumer.synchronize()
    assert event.query()
