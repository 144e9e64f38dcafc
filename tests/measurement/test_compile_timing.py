"""First call against steady state: overhead, speedup and break-even calls."""
import math
import time

from benchmarking.compile_timing import CompileTiming, compile_timing, time_first_call


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
