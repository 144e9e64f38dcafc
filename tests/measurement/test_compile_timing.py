"""First call against steady state: overhead, speedup and break-even calls."""
import math
import os
import time
from pathlib import Path

import benchmarking.compile_timing as compile_timing_module
from benchmarking.compile_timing import CompileTiming, compile_timing, first_call_in_fresh_process, time_first_call


class SlowFirstCall:
    """Like a compiled function: the first call costs ``first_s``, later ones ``steady_s``."""

    def __init__(self, first_s: float, steady_s: float):
        self.first_s, self.steady_s, self.calls = first_s, steady_s, 0

    def __call__(self, x):
        self.calls += 1
        time.sleep(self.first_s if self.calls == 1 else self.steady_s)
        return x


def test_first_call_is_timed_before_any_warmup():
    fn = SlowFirstCall(0.05, 0.0)
    timing = compile_timing(fn, lambda x: time.sleep(0.002), 1, repeats=5)
    assert fn.calls == 1 + 2 + 5                      # first call, warm-up, timed repeats
    assert timing.first_call_s >= 0.05 and timing.steady_s < 0.01
    assert timing.speedup > 1 and 0 < timing.break_even_calls < math.inf
    assert "回本" in timing.table() and "CPU" in timing.table()


def test_break_even_is_infinite_when_compiled_is_slower():
    timing = CompileTiming(first_call_s=2.0, steady_s=70e-6, eager_s=30e-6, hardware="test")
    assert timing.speedup < 1 and math.isinf(timing.break_even_calls)
    assert "永不" in timing.table()


def test_break_even_arithmetic():
    timing = CompileTiming(first_call_s=1.0 + 1e-3, steady_s=1e-3, eager_s=11e-3, hardware="test")
    assert math.isclose(timing.overhead_s, 1.0) and math.isclose(timing.break_even_calls, 100.0)


def test_time_first_call_measures_one_call():
    fn = SlowFirstCall(0.02, 0.0)
    assert time_first_call(fn, 3) >= 0.02 and fn.calls == 1


def test_fresh_process_times_only_the_first_call(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(Path(__file__).parent))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(Path(__file__).parent), os.environ.get("PYTHONPATH", "")]))
    seconds = first_call_in_fresh_process("first_call_factories", "sleeper", str(tmp_path), seconds=0.05)
    assert 0.05 <= seconds < 5
    report = tmp_path / "cache.txt"
    first_call_in_fresh_process("first_call_factories", "cache_reporter", str(tmp_path / "cache"), out=str(report))
    assert report.read_text() == str(tmp_path / "cache")


def test_cold_then_warm_share_one_cache_directory_that_starts_empty(monkeypatch):
    seen = []

    def fake(module, factory, cache_dir, **kwargs):
        seen.append((cache_dir, sorted(os.listdir(cache_dir))))
        Path(cache_dir, "compiled").write_text("")
        return 2.0 if len(seen) == 1 else 0.5

    monkeypatch.setattr(compile_timing_module, "first_call_in_fresh_process", fake)
    timing = compile_timing_module.cold_and_warm_first_call("m", "f")
    assert (timing.cold_s, timing.warm_s) == (2.0, 0.5)
    assert seen[0][0] == seen[1][0] and seen[0][1] == [] and seen[1][1] == ["compiled"]
    assert "冷缓存" in timing.table() and "CPU" in timing.table()
