"""Does the caching allocator reuse blocks by size class, report like torch.cuda and charge misses?"""
import gc

import pytest
import torch

import toychip
from toychip import allocator
from toychip.allocator import ALLOCATOR, size_class

FLOAT = 4


@pytest.fixture(autouse=True)
def empty_allocator():
    """Start from an empty cache, with no garbage collection freeing blocks mid-test."""
    gc.collect()
    torch.toychip.empty_cache()
    gc.disable()
    yield
    gc.enable()


def test_size_classes_are_512_byte_multiples_then_2_mib():
    assert [size_class(n) for n in (1, 512, 513, 1 << 20)] == [512, 512, 1024, 1 << 20]
    assert size_class((1 << 20) + 1) == 2 << 20 and size_class((2 << 20) + 1) == 4 << 20


def test_a_freed_block_is_reused_by_a_request_of_its_size_class():
    x = torch.ones(1000, device="toychip")
    misses, reserved = ALLOCATOR.num_device_alloc, torch.toychip.memory_reserved()
    del x
    assert torch.toychip.memory_reserved() == reserved      # the block stays in the cache
    y = torch.zeros(1010, device="toychip")                  # 4040 bytes: the same 4096-byte class
    assert ALLOCATOR.num_device_alloc == misses              # a hit: no new device allocation
    z = torch.zeros(2000, device="toychip")                  # another class: a miss
    assert ALLOCATOR.num_device_alloc == misses + 1
    del y, z


def test_reserved_minus_allocated_shows_rounding_and_cached_blocks():
    base_allocated, base_reserved = torch.toychip.memory_allocated(), torch.toychip.memory_reserved()
    keep = torch.ones(100, device="toychip")                 # 400 bytes in a 512-byte block
    drop = torch.ones(300, device="toychip")                 # 1200 bytes in a 1536-byte block
    assert torch.toychip.memory_allocated() - base_allocated == 512 + 1536
    del drop
    assert torch.toychip.memory_allocated() - base_allocated == 512
    assert torch.toychip.memory_reserved() - base_reserved == 512 + 1536
    states = [(b["size"], b["requested"], b["state"]) for b in torch.toychip.memory_snapshot()]
    assert (512, 400, "active") in states and (1536, 0, "cached") in states
    assert "fragmentation" in torch.toychip.memory_summary()
    torch.toychip.empty_cache()
    assert torch.toychip.memory_reserved() - base_reserved == 512   # the block in use stays
    del keep


def test_peak_and_reset_peak_memory_stats():
    torch.toychip.reset_peak_memory_stats()
    start = torch.toychip.memory_allocated()
    x = torch.ones(1024, device="toychip")
    y = x * 2
    del x, y
    assert torch.toychip.max_memory_allocated() - start == 2 * 1024 * FLOAT
    torch.toychip.reset_peak_memory_stats()
    assert torch.toychip.max_memory_allocated() == torch.toychip.memory_allocated()


def test_reset_accumulated_memory_stats_zeroes_the_totals_like_torch_cuda():
    keep = torch.ones(100, device="toychip")
    current, peak = torch.toychip.memory_allocated(), torch.toychip.max_memory_allocated()
    torch.toychip.reset_accumulated_memory_stats()
    stats = torch.toychip.memory_stats()
    for group in ("allocated_bytes", "reserved_bytes", "allocation", "segment"):
        assert stats[f"{group}.all.allocated"] == stats[f"{group}.all.freed"] == 0
    assert stats["num_device_alloc"] == stats["num_device_free"] == 0
    assert (stats["allocated_bytes.all.current"], stats["allocated_bytes.all.peak"]) == (current, peak)
    drop = torch.ones(300, device="toychip")                 # a 1536-byte block, a cache miss
    del drop
    stats = torch.toychip.memory_stats()
    assert (stats["allocation.all.allocated"], stats["allocation.all.freed"]) == (1, 1)
    assert (stats["allocated_bytes.all.allocated"], stats["allocated_bytes.all.freed"]) == (1536, 1536)
    assert stats["num_device_alloc"] == 1
    torch.toychip.empty_cache()
    assert torch.toychip.memory_stats()["reserved_bytes.all.freed"] == 1536
    del keep


def test_memory_stats_uses_torch_cuda_key_names():
    stats = torch.toychip.memory_stats()
    for group in ("allocated_bytes", "reserved_bytes", "active_bytes", "allocation", "segment"):
        for field in ("current", "peak", "allocated", "freed"):
            assert f"{group}.all.{field}" in stats
    assert stats["allocated_bytes.all.current"] == torch.toychip.memory_allocated()
    assert stats["requested_bytes.all.current"] <= stats["allocated_bytes.all.current"]
    assert stats["num_device_alloc"] == ALLOCATOR.num_device_alloc and stats["num_ooms"] == 0


def test_a_miss_costs_malloc_us_on_the_clock_and_a_hit_costs_nothing():
    chip = toychip.ChipSpec(malloc_us=50.0)
    x = torch.ones(256, device="toychip")
    with toychip.profile(spec=chip) as miss:
        y = x + 1                                            # 1024 bytes: the cache has none
    del y
    with toychip.profile(spec=chip) as hit:
        y = x + 1                                            # reuses the block just freed
    assert (miss.mallocs, miss.reserved_bytes) == (1, 1024) and hit.mallocs == 0
    assert miss.kernels["malloc"].time_us == 50.0 and "malloc" not in hit.kernels
    assert miss.time_us == pytest.approx(hit.time_us + 50.0)


def test_the_default_chip_charges_no_time_for_allocation():
    x = torch.ones(4096, device="toychip")
    with toychip.profile() as p:
        y = x.exp()
    assert p.mallocs == 1 and "malloc" not in p.kernels
    assert p.time_us == toychip.DEFAULT_SPEC.kernel_us(2 * 4096 * FLOAT, 4096)
    del y


def test_buffers_materialised_by_lazy_mode_are_booked():
    x = torch.ones(512, device="toychip")
    before = torch.toychip.memory_allocated()
    with toychip.lazy():
        y = x * 3
    assert torch.toychip.memory_allocated() - before == 512 * FLOAT
    del y


def test_a_pending_lazy_value_holds_no_block_until_its_graph_runs():
    x = torch.ones(1024, device="toychip")
    before = torch.toychip.memory_allocated()
    with toychip.lazy():
        x.add_(1)                                            # x's storage now holds a graph node
        assert torch.toychip.memory_allocated() == before - 1024 * FLOAT
    assert torch.toychip.memory_allocated() == before and x.cpu()[0].item() == 2.0


def best_fit(free_blocks, size):
    fits = [i for i, s in enumerate(free_blocks) if s >= size]
    return min(fits, key=lambda i: free_blocks[i], default=None)


def test_freed_split_blocks_merge_back_into_one_as_c10_does():
    chip = allocator.CachingAllocator(best_fit, device=0)
    big = allocator._Request(16 * 1024)
    lease = chip.lease(big)
    del lease                                            # one 16 KiB segment, cached
    requests = [allocator._Request(4096) for _ in range(4)]
    parts = [chip.lease(r) for r in requests]            # the cached block split four ways
    assert [b["size"] for b in chip.snapshot()] == [4096] * 4
    del parts
    assert [(b["size"], b["state"]) for b in chip.snapshot()] == [(16 * 1024, "cached")]


def test_replay_keeps_the_exercise_world_where_split_blocks_never_merge():
    trace = [("alloc", "big", 16 * 1024), ("free", "big"), ("alloc", "a", 4096), ("free", "a"),
             ("alloc", "b", 16 * 1024)]
    assert allocator.replay(trace, best_fit)["device_allocs"] == 2


def test_a_block_is_handed_out_again_only_to_the_stream_it_was_allocated_on():
    side = torch.toychip.Stream()
    with torch.toychip.stream(side):
        x = torch.empty(1000, device="toychip")
    del x
    before = torch.toychip.memory_stats()["num_device_alloc"]
    y = torch.empty(1000, device="toychip")              # default stream: the side stream's block is not its
    assert torch.toychip.memory_stats()["num_device_alloc"] == before + 1
    assert {b["stream"] for b in torch.toychip.memory_snapshot() if b["state"] == "cached"} >= {side.stream_id}
    del y
