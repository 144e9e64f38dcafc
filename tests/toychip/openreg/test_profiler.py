"""Mirrors OpenReg's tests/test_profiler.py: torch.autograd.profiler.profile(use_device="toychip").

With ``use_device`` naming the chip, torch 2.13 profiles in KINETO_PRIVATEUSE1_FALLBACK mode: it
asks the chip's profiler stubs (``csrc/ToyChipProfiler.cpp``) for a device event around every op.
Beyond upstream's checks (events are recorded, names appear), these check that every time is a
real one: CPU times are non-negative, and an op's device time is the simulated clock's.
"""
import json

import pytest
import torch
import torch.nn as nn
from torch.autograd.profiler import profile
from torch.profiler import record_function

import toychip

NOT_MIRRORED = {}


class SimpleModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.relu, self.fc2 = nn.Linear(10, 20), nn.ReLU(), nn.Linear(20, 10)

    def forward(self, x):
        return self.fc2(self.relu(self.fc1(x)))


@pytest.fixture
def model():
    torch.manual_seed(0)
    return SimpleModel().to("toychip")


def names(prof) -> list[str]:
    return [e.name for e in prof.function_events]


def assert_times_are_real(prof):
    """Each event's CPU interval is a real one (without the chip's stubs they were -1e17 us)."""
    for e in prof.function_events:
        assert 0 <= e.time_range.start <= e.time_range.end, e
        assert e.cpu_time_total >= 0 and e.device_time_total >= 0, e


# ----------------------------------------------------------------- TestProfiler
def test_profiler_basic():
    with profile(use_device="toychip") as prof:
        x = torch.randn(10, 10, device="toychip")
        x + x
    assert "aten::add" in names(prof) and "aten::randn" in names(prof)
    assert_times_are_real(prof)


def test_profiler_with_record_function():
    with profile(use_device="toychip") as prof:
        with record_function("toychip_custom_operation"):
            x = torch.randn(10, 10, device="toychip")
            x @ x
    outer = next(e for e in prof.function_events if e.name == "toychip_custom_operation")
    assert "aten::mm" in {child.name for e in outer.cpu_children for child in [e, *e.cpu_children]}


def test_profiler_multiple_streams():
    first, second = torch.Stream(device="toychip"), torch.Stream(device="toychip")
    with profile(use_device="toychip") as prof:
        with first:
            x = torch.randn(10, 10, device="toychip")
            x + x
        with second:
            z = torch.randn(10, 10, device="toychip")
            z * z
    assert {"aten::add", "aten::mul"} <= set(names(prof))
    assert_times_are_real(prof)


def test_profiler_event_synchronization():
    with profile(use_device="toychip") as prof:
        stream = torch.Stream(device="toychip")
        event = torch.Event(device="toychip", enable_timing=True)
        with stream:
            x = torch.randn(10, 10, device="toychip")
            event.record(stream)
            x + x
        event.synchronize()
    assert event.query() and "aten::add" in names(prof)


def test_profiler_nested_record_function():
    with profile(use_device="toychip") as prof:
        with record_function("outer_operation"):
            x = torch.randn(10, 10, device="toychip")
            with record_function("inner_operation_1"):
                x + x
            with record_function("inner_operation_2"):
                (x + x) * (x + x)
    events = {e.name: e for e in prof.function_events}
    outer = events["outer_operation"]
    assert {"inner_operation_1", "inner_operation_2"} <= {e.name for e in outer.cpu_children}
    for inner in ("inner_operation_1", "inner_operation_2"):
        assert outer.time_range.start <= events[inner].time_range.start <= events[inner].time_range.end \
            <= outer.time_range.end


def test_profiler_key_averages():
    with profile(use_device="toychip") as prof:
        for _ in range(10):
            x = torch.randn(10, 10, device="toychip")
            x + x
    averages = {avg.key: avg for avg in prof.key_averages()}
    assert averages["aten::add"].count == 10 and averages["aten::randn"].count == 10
    for avg in averages.values():
        assert avg.cpu_time_total >= 0 and avg.self_cpu_time_total >= 0


def test_profiler_table_output():
    with profile(use_device="toychip") as prof:
        x = torch.randn(10, 10, device="toychip")
        x @ (x + x)
    table = prof.key_averages().table(sort_by="cpu_time_total", row_limit=10)
    assert "aten::mm" in table and "aten::add" in table


def test_profiler_export_chrome_trace(tmp_path):
    with profile(use_device="toychip") as prof:
        x = torch.randn(10, 10, device="toychip")
        x @ (x + x)
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    trace = json.loads(path.read_text())
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    assert "aten::mm" in {e.get("name") for e in events}
    assert all(e["dur"] >= 0 for e in events if "dur" in e)


def test_profiler_with_shapes():
    with profile(use_device="toychip", record_shapes=True) as prof:
        x = torch.randn(10, 20, device="toychip")
        y = torch.randn(20, 30, device="toychip")
        x @ y
    shapes = {avg.input_shapes and tuple(map(tuple, avg.input_shapes))
              for avg in prof.key_averages(group_by_input_shape=True) if avg.key == "aten::mm"}
    assert ((10, 20), (20, 30)) in shapes


def test_profiler_default_stream_initialization():
    # No stream was ever made in this block: the stubs record on the default stream.
    with profile(use_device="toychip") as prof:
        x = torch.randn(10, 10, device="toychip")
        x + 1.0
    assert "aten::add" in names(prof)
    assert_times_are_real(prof)


def test_profiler_stream_event_correlation():
    first, second = torch.Stream(device="toychip"), torch.Stream(device="toychip")
    with profile(use_device="toychip") as prof:
        with record_function("stream1_ops"), first:
            x = torch.randn(10, 10, device="toychip")
            x + x
        with record_function("stream2_ops"), second:
            z = torch.randn(10, 10, device="toychip")
            z * z
    events = {e.name: e for e in prof.function_events}
    assert "aten::add" in {e.name for e in events["stream1_ops"].cpu_children}
    assert "aten::mul" in {e.name for e in events["stream2_ops"].cpu_children}


def test_profiler_elapsed_time():
    x, y = torch.randn(100, 100, device="toychip"), torch.eye(100, device="toychip")
    with toychip.profile() as simulated, profile(use_device="toychip") as prof:
        for _ in range(10):
            x = x @ y
    mm = [e for e in prof.function_events if e.name == "aten::mm"]
    assert len(mm) == 10 and all(e.cpu_time_total > 0 for e in mm)
    # each mm's device time is its kernel's simulated time (whole microseconds: torch truncates)
    kernels = [op.duration_us for op in simulated.timeline if op.name == "mm.default"]
    assert [e.device_time_total for e in mm] == [int(us) for us in kernels] and min(kernels) >= 1


def test_profiler_context_manager_multiple_times():
    for _ in range(3):
        with profile(use_device="toychip") as prof:
            x = torch.randn(10, 10, device="toychip")
            x + 1
        assert names(prof).count("aten::add") == 1
        assert_times_are_real(prof)


def test_profiler_with_backward_pass():
    with profile(use_device="toychip", record_shapes=True) as prof:
        x = torch.randn(10, 10, device="toychip", requires_grad=True)
        y = torch.randn(10, 10, device="toychip", requires_grad=True)
        (x @ y).sum().backward()
    assert "aten::mm" in names(prof)
    assert any(name.startswith("autograd::engine::evaluate_function: MmBackward") for name in names(prof))
    assert_times_are_real(prof)


# ----------------------------------------------------------------- TestProfilerEdgeCases
def test_profiler_empty_operations():
    with profile(use_device="toychip") as prof:
        pass
    assert isinstance(prof.function_events, list)
    assert not [name for name in names(prof) if name.startswith("aten::")]


def test_profiler_exception_handling():
    with pytest.raises(RuntimeError, match="^Test exception$"):
        with profile(use_device="toychip") as prof:
            torch.randn(10, 10, device="toychip")
            raise RuntimeError("Test exception")
    assert "aten::randn" in names(prof)
    assert_times_are_real(prof)


def test_profiler_large_number_of_events():
    with profile(use_device="toychip") as prof:
        x = torch.randn(10, 10, device="toychip")
        for i in range(100):
            with record_function(f"op_{i}"):
                x = x + 1
    assert names(prof).count("aten::add") == 100 and "op_99" in names(prof)


# ----------------------------------------------------------------- TestProfilerMultiDevice
def test_profiler_single_device():
    with profile(use_device="toychip") as prof:
        x = torch.randn(10, 10, device="toychip:0")
        x + x
    add = next(e for e in prof.function_events if e.name == "aten::add")
    assert add.cpu_time_total >= 0


def test_profiler_multiple_devices():
    with profile(use_device="toychip") as prof:
        x0 = torch.randn(10, 10, device="toychip:0")
        x1 = torch.randn(10, 10, device="toychip:1")
        x0 + x0
        x1 + x1
    assert names(prof).count("aten::add") == 2
    assert_times_are_real(prof)


# ----------------------------------------------------------------- TestProfilerIntegration
def test_profiler_with_simple_model(model):
    x = torch.randn(32, 10, device="toychip")
    with profile(use_device="toychip") as prof:
        model(x)
    assert names(prof).count("aten::linear") == 2 and "aten::relu" in names(prof)


def test_profiler_with_training_step(model):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    x, target = torch.randn(32, 10, device="toychip"), torch.randn(32, 10, device="toychip")
    with profile(use_device="toychip", record_shapes=True) as prof:
        with record_function("forward"):
            output = model(x)
        with record_function("loss"):
            loss = nn.MSELoss()(output, target)
        with record_function("backward"):
            loss.backward()
        with record_function("optimizer_step"):
            optimizer.step()
            optimizer.zero_grad()
    assert {"forward", "loss", "backward", "optimizer_step"} <= set(names(prof))
    assert all(p.grad is None for p in model.parameters())


def test_profiler_with_multiple_batches(model):
    with profile(use_device="toychip") as prof:
        for i in range(5):
            with record_function(f"batch_{i}"):
                model(torch.randn(16, 10, device="toychip"))
    assert {f"batch_{i}" for i in range(5)} <= set(names(prof))


def test_profiler_table_with_model(model):
    x = torch.randn(32, 10, device="toychip")
    with profile(use_device="toychip", record_shapes=True) as prof:
        for _ in range(10):
            model(x)
    table = prof.key_averages().table(sort_by="cpu_time_total", row_limit=20)
    assert "aten::linear" in table and "aten::relu" in table


def test_profiler_with_inference(model):
    model.eval()
    with profile(use_device="toychip") as prof, torch.no_grad():
        for _ in range(5):
            model(torch.randn(16, 10, device="toychip"))
    assert names(prof).count("aten::relu") == 5
    assert not [name for name in names(prof) if "backward" in name.lower()]


def test_profiler_with_data_transfer():
    with profile(use_device="toychip") as prof:
        x_cpu = torch.randn(50, 50)
        with record_function("to_toychip"):
            x = x_cpu.to("toychip")
        with record_function("compute_toychip"):
            y = x @ x
        with record_function("to_cpu"):
            y.cpu()
    events = {e.name: e for e in prof.function_events}
    assert {"to_toychip", "compute_toychip", "to_cpu"} <= set(events)
    assert "aten::to" in {e.name for e in events["to_toychip"].cpu_children}


def test_profiler_with_mixed_operations():
    with profile(use_device="toychip", record_shapes=True) as prof:
        x = torch.randn(20, 20, device="toychip")
        torch.relu(torch.matmul(x, x + 1.0)).transpose(0, 1).sum()
    assert {"aten::add", "aten::matmul", "aten::relu", "aten::transpose", "aten::sum"} <= set(names(prof))


# ----------------------------------------------------------------- TestProfilerPerformance
def test_profiler_overhead(model):
    x = torch.randn(32, 10, device="toychip")
    with profile(use_device="toychip") as prof:
        for _ in range(20):
            model(x)
    # the stubs call into the simulated clock twice an op: a profiled step stays in milliseconds
    assert names(prof).count("aten::linear") == 40
    assert prof.self_cpu_time_total < 20 * 20_000
