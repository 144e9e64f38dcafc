"""Do streams and events shape the simulated timeline: copies overlapping kernels, event times?"""
import pytest
import torch

import toychip
from toychip import ledger

tc = torch.toychip
SPEC = toychip.DEFAULT_SPEC


def test_on_one_stream_elapsed_time_is_the_busy_time():
    x = torch.randn(64, 64, device="toychip")
    with toychip.profile() as p:
        y = torch.relu(x @ x).cpu()
    assert p.elapsed_us == p.time_us > 0
    del y


def test_a_copy_on_a_side_stream_overlaps_a_kernel():
    batch, x = torch.randn(256, 256).pin_memory(), torch.randn(256, 256, device="toychip")
    copy_us = SPEC.copy_us_for(batch.nbytes)
    kernel_us = SPEC.kernel_us(3 * x.nbytes, 2 * 256 ** 3)
    side = tc.Stream()
    with toychip.profile() as p:
        with tc.stream(side):
            nxt = batch.to("toychip", non_blocking=True)
        y = x @ x                                            # default stream, compute engine
        tc.current_stream().wait_stream(side)
        z = nxt + y
    add_us = SPEC.kernel_us(3 * x.nbytes, x.numel())
    assert p.time_us == pytest.approx(copy_us + kernel_us + add_us)
    assert p.elapsed_us == pytest.approx(max(copy_us, kernel_us) + add_us)   # the add waits for both
    del z


@pytest.mark.parametrize("pinned, non_blocking", [(True, False), (False, True), (False, False)])
def test_a_blocking_copy_makes_later_work_on_every_stream_wait(pinned, non_blocking):
    batch, x = torch.randn(256, 256), torch.randn(256, 256, device="toychip")
    batch = batch.pin_memory() if pinned else batch
    side = tc.Stream()
    with toychip.profile() as p:
        with tc.stream(side):
            nxt = batch.to("toychip", non_blocking=non_blocking)
        y = x @ x                                            # issued after the host waited for the copy
    assert p.elapsed_us == pytest.approx(p.time_us)
    del nxt, y


def test_synchronize_makes_the_host_wait_for_a_stream():
    batch, x = torch.randn(256, 256).pin_memory(), torch.randn(256, 256, device="toychip")
    side = tc.Stream()
    with toychip.profile() as p:
        with tc.stream(side):
            nxt = batch.to("toychip", non_blocking=True)
        side.synchronize()
        y = x @ x
    assert p.elapsed_us == pytest.approx(p.time_us)
    del nxt, y


def test_two_kernels_on_two_streams_share_the_compute_engine():
    x = torch.randn(128, 128, device="toychip")
    side = tc.Stream()
    side.wait_stream(tc.current_stream())                     # x is ready before the side stream reads it
    with toychip.profile() as p:
        a = x @ x
        with tc.stream(side):
            b = x @ x
    assert p.elapsed_us == pytest.approx(p.time_us)           # one compute engine: no overlap
    del a, b


def test_event_elapsed_time_is_simulated_milliseconds():
    x = torch.randn(1000, device="toychip")
    start, end = tc.Event(enable_timing=True), tc.Event(enable_timing=True)
    with toychip.profile():
        start.record()
        x.exp()
        end.record()
    assert start.elapsed_time(end) == pytest.approx(SPEC.kernel_us(2 * x.nbytes, x.numel()) / 1000)


def test_waiting_on_an_event_delays_the_waiting_stream_only():
    x = torch.randn(1000, device="toychip")
    side, done = tc.Stream(), tc.Event()
    side.wait_stream(tc.current_stream())
    with toychip.profile() as p:
        with tc.stream(side):
            x.exp()
            done.record()
        before = p.stream_us.get((0, 0), 0.0)
        tc.current_stream().wait_event(done)
    assert before == 0.0 and p.stream_us[0, 0] == p.stream_us[0, side.stream_id] > 0


def test_outside_a_profile_events_read_the_chips_clock_where_recording_takes_time():
    x = torch.randn(1000, device="toychip")
    start, back_to_back, end = (tc.Event(enable_timing=True) for _ in range(3))
    start.record()
    back_to_back.record()
    x.exp()
    end.record()
    assert start.elapsed_time(back_to_back) == pytest.approx(SPEC.event_us / 1000)
    assert back_to_back.elapsed_time(end) == pytest.approx((SPEC.kernel_us(2 * x.nbytes, x.numel()) + SPEC.event_us) / 1000)
    with pytest.raises(ValueError, match="enable_timing"):  # torch.Event's own check
        tc.Event().elapsed_time(end)


def test_the_chips_clock_runs_only_while_a_recorded_event_is_alive():
    event = tc.Event()
    event.record()
    assert ledger.charging() and not ledger.profiling()
    del event
    assert not ledger.charging()


def test_each_chip_keeps_its_own_time():
    x0, x1 = torch.randn(1000, device="toychip:0"), torch.randn(1000, device="toychip:1")
    on_1 = torch.Stream(device="toychip:1")
    on_1.wait_stream(tc.default_stream(1))
    with toychip.profile() as p:
        x0.exp()                                # chip 0's default stream
        with tc.stream(on_1):
            x1.exp()                            # beside it: chip 1 has engines of its own
    assert p.stream_us[0, 0] == p.stream_us[1, on_1.stream_id] == p.elapsed_us == pytest.approx(p.time_us / 2)
    assert [(e.device, e.stream, e.start_us) for e in p.timeline] == [(0, 0, 0.0), (1, on_1.stream_id, 0.0)]
    on_0, on_1 = (stream.record_event(tc.Event(enable_timing=True)) for stream in (tc.current_stream(), on_1))
    with pytest.raises(RuntimeError, match="record both events on one chip"):
        on_0.elapsed_time(on_1)
    with pytest.raises(RuntimeError, match="record both events on one chip"):   # not SystemError: the
        on_0.elapsed_time(on_1_stream_event())                                  # event dies mid-raise


def on_1_stream_event():
    """An event recorded on chip 1, referenced by nothing but the caller's expression."""
    return torch.Stream(device="toychip:1").record_event(tc.Event(enable_timing=True))


def test_stream_context_restores_the_previous_stream():
    side = tc.Stream()
    with side:
        assert tc.current_stream() == side
        with tc.stream(None):
            assert tc.current_stream() == side
    assert tc.current_stream() == tc.default_stream() and side.query()


def test_chrome_trace_has_one_row_per_stream_and_the_overlap(tmp_path):
    import json

    batch, x = torch.randn(64, 64).pin_memory(), torch.randn(64, 64, device="toychip")
    side = tc.Stream()
    with toychip.profile() as p:
        with tc.stream(side):
            nxt = batch.to("toychip", non_blocking=True)
        y = x @ x
    p.export_chrome_trace(str(tmp_path / "trace.json"))
    events = json.loads((tmp_path / "trace.json").read_text())["traceEvents"]
    ops = {e["name"]: e for e in events if e["ph"] == "X"}
    assert ops["copy:to_chip"]["tid"] == side.stream_id and ops["mm.default"]["tid"] == 0
    assert ops["copy:to_chip"]["ts"] == ops["mm.default"]["ts"] == 0.0     # they overlap
    assert {e["args"]["name"] for e in events if e["ph"] == "M"} == {"stream 0", f"stream {side.stream_id}"}
    del nxt, y


def test_the_stream_context_restores_the_device_as_well():
    with tc.stream(torch.Stream(device="toychip:1")):
        assert tc.current_device() == 1 and tc.current_stream(1).stream_id != 0
    assert tc.current_device() == 0
