"""The copy roofline: a clone of the same bytes is timed in the same interleaved run."""
import math

import torch

from benchmarking.roofline import COPY, compare_with_copy


def test_copy_is_timed_with_the_candidates_and_fractions_are_relative_to_it():
    calls = []
    x = torch.ones(1000)
    result = compare_with_copy({"f": lambda t: calls.append(t.numel())}, x, warmup=1, repeats=3)
    assert calls == [1000] * 4
    assert set(result.comparison.measurements) == {"f", COPY}
    assert math.isclose(result.fraction(COPY), 1.0)
    assert result.bytes_moved == 2 * 1000 * 4


def test_bandwidth_and_table_name_every_candidate():
    x = torch.ones(1 << 16)
    result = compare_with_copy({"relu": torch.relu}, x, repeats=3)
    assert result.bandwidth_gbs("relu") > 0 and result.fraction("relu") > 0
    table = result.table()
    assert "relu" in table and COPY in table and "CPU" in table


def test_cuda_request_without_a_gpu_times_on_the_host():
    result = compare_with_copy({"relu": torch.relu}, torch.ones(64), repeats=2, device="cuda")
    assert len(result["relu"].samples) == 2
