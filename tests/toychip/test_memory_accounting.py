"""Does a profile count the device memory a block allocates, frees and holds at most?"""
import gc

import numpy as np
import torch

import toychip
from toychip import ledger, memory


def test_fresh_results_are_counted_and_freed_buffers_leave_the_live_count():
    x = torch.randn(100, 100).to("toychip")           # allocated before the block: not counted
    with toychip.profile() as p:
        y = torch.relu(x * 2)                          # two 40 000-byte results; x * 2 dies at once
        assert p.live_bytes == 40_000
        del y
    assert p.allocated_bytes == 80_000
    assert p.peak_bytes == 80_000
    assert p.live_bytes == 0


def test_views_and_in_place_ops_allocate_nothing():
    x = torch.randn(64, 64).to("toychip")
    with toychip.profile() as p:
        v = x.t()[:8]
        x.mul_(2)
        x.add_(1)
    assert p.allocated_bytes == 0 and p.peak_bytes == 0
    del v


def test_host_copies_count_their_device_buffer():
    with toychip.profile() as p:
        x = torch.ones(10, 10).to("toychip")
    assert p.allocated_bytes == 400 and p.live_bytes == 400
    del x


def test_nested_profiles_each_count_what_happens_inside_them():
    x = torch.randn(10, 10).to("toychip")
    with toychip.profile() as outer:
        a = x + 1
        with toychip.profile() as inner:
            b = x + 2
        del a, b
    assert outer.allocated_bytes == 800 and inner.allocated_bytes == 400
    assert outer.live_bytes == 0 and inner.live_bytes == 0


def test_nothing_is_counted_outside_a_profile():
    before = len(memory._counted)
    x = torch.randn(10, 10).to("toychip") * 3
    assert len(memory._counted) == before and not ledger.profiling()
    del x


def test_a_result_is_new_memory_unless_it_is_marked_as_a_view_of_an_input():
    base = np.ones((4, 4), np.float32)
    with toychip.profile() as p:
        t = memory.wrap(base[:2])                     # a kernel's result: new memory
        u = memory.wrap(base.T, counted=False)        # as a compiled graph marks t(input): not new
    assert p.allocated_bytes == base[:2].nbytes
    del t, u


def test_summary_reports_memory_and_is_deterministic():
    x = torch.randn(32, 32).to("toychip")
    summaries = []
    for _ in range(2):
        with toychip.profile() as p:
            torch.tanh(x @ x).sum()
        summaries.append(p.summary())
    assert summaries[0] == summaries[1]
    assert summaries[0]["peak_bytes"] == 4096 + 4096 and summaries[0]["allocated_bytes"] >= 8192


def test_lazy_execution_frees_its_inputs_without_the_garbage_collector(run_training):
    """Buffers kept alive by a reference cycle die whenever the collector runs, so
    ``peak_bytes`` would change from run to run; lazy sync must build no such cycle."""
    from toychip.lazy_tensor import LazyNode

    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        run_training("mlp", "lazy", steps=2)
        gc.collect()
        kept = [o for o in gc.garbage if isinstance(o, LazyNode)]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    assert kept == []
