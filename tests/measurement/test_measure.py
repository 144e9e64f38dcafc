"""Measurement protocol: warm-up, interleaving, medians, ratios and the plot."""
import importlib
import json

import pytest

from benchmarking import compare, describe_hardware, measure
from course_models.ch01_models import GPU_TIMINGS


def test_candidates_are_interleaved_after_their_warmup():
    calls = []
    result = compare({"a": lambda: calls.append("a"), "b": lambda: calls.append("b")},
                     warmup=2, repeats=3)
    assert calls == ["a", "a", "b", "b"] + ["a", "b"] * 3
    assert len(result["a"].samples) == 3 and result.hardware == describe_hardware()


def test_number_calls_per_sample_and_median_ratio():
    calls = []
    result = compare({"a": lambda x: calls.append(x), "b": lambda x: None}, 7, warmup=0, repeats=2, number=5)
    assert calls == [7] * 10
    assert result.ratio("a", "a") == 1.0
    assert "median" in result.table() and "CPU" in result.table()


def test_bad_protocol_arguments_are_rejected():
    with pytest.raises(ValueError):
        compare({})
    with pytest.raises(ValueError):
        measure(lambda: None, repeats=0)


def test_measure_returns_statistics():
    m = measure(lambda: sum(range(100)), name="sum", repeats=5)
    assert m.median > 0 and m.iqr >= 0 and str(m).startswith("sum: median")


def test_plot_is_a_figure_with_the_hardware_in_its_title():
    figure = compare({"a": lambda: None, "b": lambda: None}, repeats=3).plot("title")
    title = figure.axes[0].get_title()
    assert "title" in title and describe_hardware() in title


def test_the_docstring_quotes_the_recorded_cost_of_a_synchronize_around_every_call():
    recorded = json.loads(GPU_TIMINGS.read_text(encoding="utf-8"))
    chain = recorded["pointwise_chain"]
    extra = {name: round(chain["synchronize_every_call_us"][name] - chain[f"{name}_us"])
             for name in ("eager", "compiled", "copy")}
    doc = importlib.import_module("benchmarking.measure").__doc__
    assert "H100" in recorded["hardware"] and recorded["torch"].startswith("2.11")
    assert f"+{extra['eager']} µs eager, +{extra['compiled']} µs compiled, +{extra['copy']} µs for a copy" in doc
    assert f"calls of {round(chain['copy_us'])}–{round(chain['eager_us'])} µs" in doc
