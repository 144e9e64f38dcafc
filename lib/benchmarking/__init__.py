"""Honest timing for notebooks: warm-up, repeats, medians, A/B interleaving, hardware stated.

    from benchmarking import compare
    result = compare({"eager": f, "compiled": g}, x)
    result.ratio("compiled", "eager")   # < 1 means compiled is faster
    result.plot()                       # bar chart, hardware in the title

Absolute seconds depend on the machine and its load; ratios measured in one process,
interleaved, are what the course reports and grades.
"""
from .hardware import describe_hardware
from .measure import Comparison, Measurement, compare, measure
from .threads import one_torch_thread

__all__ = ["measure", "compare", "Measurement", "Comparison", "describe_hardware", "one_torch_thread"]
