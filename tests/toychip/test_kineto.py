"""Does torch.profiler see the chip? Its exported trace and key_averages() against the simulated clock."""
import json
import os
from collections import defaultdict

import pytest
import torch
from torch.profiler import ProfilerActivity, profile

import toychip
from toychip import kineto, ledger
from toychip.trace import device_ops, text_table, trace_rows

ACTIVITIES = [ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]


def _step(x, host, side):
    """A training-like step: a copy on a side stream, forward and backward on the default
    stream, a wait for the copy, and work on the second chip."""
    with torch.toychip.stream(side):
        nxt = host.to("toychip", non_blocking=True)
    (x @ x).relu().sum().backward()
    torch.toychip.current_stream().wait_stream(side)
    nxt.mul_(2)
    with torch.toychip.device(1):
        (torch.ones(8, device="toychip:1") + 1).cpu()


@pytest.fixture(scope="module")
def traced(tmp_path_factory):
    """One profiled step: (torch.profiler's profile, the simulated clock's, the trace's events, its path)."""
    x = torch.randn(64, 64, device="toychip", requires_grad=True)
    host, side = torch.randn(256, 256), torch.toychip.Stream()
    with profile(activities=ACTIVITIES) as prof:
        with toychip.profile() as clock:
            _step(x, host, side)
    path = tmp_path_factory.mktemp("kineto") / "step.json"
    prof.export_chrome_trace(str(path))
    return prof, clock, json.loads(path.read_text())["traceEvents"], path


def _chip_events(events):
    return [e for e in events if e.get("cat") in ("kernel", "gpu_memcpy")]


def test_the_trace_has_cpu_ops_and_every_chip_op_on_its_chip_and_stream_row(traced):
    _, clock, events, _ = traced
    assert any(e.get("cat") == "cpu_op" for e in events)
    chip = _chip_events(events)
    assert [(e["name"], e["pid"], e["tid"]) for e in chip] == [(e.name, e.device, e.stream) for e in clock.timeline]
    assert {e["pid"] for e in chip} == {0, 1} and len({(e["pid"], e["tid"]) for e in chip}) == 3
    names = {e["pid"]: e["args"]["name"] for e in events if e.get("name") == "process_name" and e["pid"] in (0, 1)}
    assert names == {0: "toychip:0", 1: "toychip:1"}


def test_chip_durations_are_the_simulated_clocks_to_the_nanosecond(traced):
    _, clock, events, _ = traced
    for event, op in zip(_chip_events(events), clock.timeline, strict=True):
        assert event["dur"] == pytest.approx(op.duration_us, abs=1e-3)


def test_each_chip_op_is_linked_to_the_cpu_op_that_launched_it_and_starts_after_the_launch(traced):
    _, _, events, _ = traced
    cpu_ops = {e["args"]["External id"]: e for e in events if e.get("cat") == "cpu_op" and "External id" in e["args"]}
    flows = defaultdict(dict)
    for e in events:
        if e.get("cat") == "ac2g":
            flows[e["id"]][e["ph"]] = e
    assert len(flows) == len(_chip_events(events))
    for flow in flows.values():
        start, end = flow["s"], flow["f"]
        assert end["pid"] in (0, 1) and start["pid"] not in (0, 1)  # from the host's row to a chip's
        assert start["ts"] <= end["ts"]
    for e in _chip_events(events):
        launcher = cpu_ops[e["args"]["External id"]]
        assert launcher["ts"] <= e["ts"]


def test_no_time_is_negative_or_counted_from_zero(traced):
    _, _, events, _ = traced
    starts = [e["ts"] for e in events if "ts" in e]
    assert min(starts) > 0 and all(e.get("dur", 0) >= 0 for e in events)
    assert min(e["ts"] for e in _chip_events(events)) > 1e6  # on the profiler's clock, not from 0


def test_key_averages_device_time_is_the_simulated_clocks(traced):
    prof, clock, _, _ = traced
    device_us = {e.key: e.device_time_total for e in prof.key_averages()}
    assert device_us["aten::mm"] == pytest.approx(clock.kernels["mm.default"].time_us, abs=1e-3)
    assert device_us["aten::relu"] == pytest.approx(clock.kernels["relu.default"].time_us, abs=1e-3)
    kernels = [e for e in prof.key_averages() if e.device_type == torch.autograd.DeviceType.PrivateUse1]
    assert sum(e.self_device_time_total for e in kernels) == pytest.approx(clock.time_us, abs=1e-2)


def test_trace_rows_reads_the_chips_rows_back(traced):
    _, clock, _, path = traced
    chip_rows = [r for r in trace_rows(str(path)) if r.process.startswith("toychip:")]
    assert sum(r.events for r in chip_rows if r.category == "gpu_memcpy") == clock.copies
    assert all(r.linked == r.events for r in chip_rows)
    assert sum(r.total_us for r in chip_rows) == pytest.approx(clock.time_us, abs=1e-2)


def test_a_kernel_waiting_for_a_copy_on_another_stream_starts_when_the_copy_ends(tmp_path):
    side, host, x = torch.toychip.Stream(), torch.randn(16), torch.randn(16, device="toychip")
    with profile(activities=ACTIVITIES) as prof:
        with toychip.profile(spec=toychip.ChipSpec(copy_us=1e6)):  # a copy far slower than the host
            with torch.toychip.stream(side):
                host.to("toychip", non_blocking=True)
            torch.toychip.current_stream().wait_stream(side)
            torch.relu(x)
    path = tmp_path / "waits.json"
    prof.export_chrome_trace(str(path))
    copy, relu = device_ops(str(path))
    assert (copy.cpu_op, copy.queued_us) == ("aten::_copy_from", 0.0)
    assert relu.cpu_op == "aten::relu" and relu.thread == "stream 0" and relu.queued_us > 0
    events = json.loads(path.read_text())["traceEvents"]
    starts = {e["name"]: e["ts"] for e in _chip_events(events)}
    assert starts["relu.default"] == pytest.approx(starts["copy:to_chip"] + copy.duration_us, abs=1e-3)


def test_a_cpu_only_trace_leaves_the_chip_alone():
    x = torch.randn(4, device="toychip")
    with profile(activities=ACTIVITIES):  # a trace of the chip before: nothing of it is left on
        torch.relu(x)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        torch.relu(x)
    assert not ledger.charging()
    assert all(e.device_type == torch.autograd.DeviceType.CPU for e in prof.events())


def test_the_ledger_stops_charging_when_the_trace_stops():
    with profile(activities=ACTIVITIES):
        torch.relu(torch.randn(4, device="toychip"))
        assert ledger.charging()
    assert not ledger.charging()


def test_require_says_when_torch_has_no_kineto(monkeypatch):
    kineto.require()
    monkeypatch.setattr(torch.autograd, "kineto_available", lambda: False)
    with pytest.raises(RuntimeError, match="without Kineto"):
        kineto.require()


def test_kinetos_own_start_stop_lines_are_dropped_and_the_rest_of_stderr_kept(capfd):
    with kineto.without_kineto_log_lines():
        with profile(activities=ACTIVITIES):
            torch.ones(2, device="toychip").add_(1)
        os.write(2, b"a line of our own\n")
    err = capfd.readouterr().err
    assert "profiler_start" not in err and "profiler_stop" not in err
    assert "a line of our own" in err


def test_text_table_pads_chinese_headings_by_display_width():
    lines = text_table(["行", "时长 us"], [("stream 0", 1.5), ("stream 12", 10.25)]).splitlines()
    assert lines == ["行         时长 us", "stream 0     1.500", "stream 12   10.250"]
