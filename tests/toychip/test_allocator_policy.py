"""A block-selection policy plugged into the caching allocator: splitting, replay, use_policy."""
import pytest
import torch

import toychip
from toychip import allocator

KIB = 1024


def best_fit(free_blocks, size):
    fits = [i for i, s in enumerate(free_blocks) if s >= size]
    return min(fits, key=lambda i: free_blocks[i], default=None)


def first_fit(free_blocks, size):
    return next((i for i, s in enumerate(free_blocks) if s >= size), None)


# a 4 KiB and a 1 KiB block are cached (4 KiB first); then 1 KiB and 4 KiB are asked for
TRACE = [("alloc", "a", 4 * KIB), ("alloc", "b", KIB), ("free", "a"), ("free", "b"),
         ("alloc", "c", KIB), ("alloc", "d", 4 * KIB)]


def test_default_policy_reuses_only_the_same_size_class():
    result = allocator.replay(TRACE)
    assert result["peak_reserved"] == 5 * KIB and result["device_allocs"] == 2


def test_first_fit_splits_the_big_block_and_must_reserve_again():
    result = allocator.replay(TRACE, first_fit)
    assert result["peak_reserved"] == 9 * KIB and result["device_allocs"] == 3


def test_best_fit_splits_only_when_needed():
    trace = [("alloc", "a", 4 * KIB), ("free", "a"), ("alloc", "b", KIB), ("alloc", "c", 2 * KIB)]
    result = allocator.replay(trace, best_fit)
    assert result == {"peak_reserved": 4 * KIB, "peak_allocated": 4 * KIB, "device_allocs": 1,
                      "fragmentation": 0.0}
    assert allocator.replay(trace)["peak_reserved"] == 7 * KIB


def test_fragmentation_counts_rounding_at_the_peak():
    result = allocator.replay([("alloc", "a", 100)])
    assert result["peak_reserved"] == 512 and result["fragmentation"] == pytest.approx(1 - 100 / 512, abs=1e-6)


@pytest.mark.parametrize("bad", [lambda free, size: 7 if free else None, lambda free, size: "0" if free else None,
                                 lambda free, size: True if free else None])
def test_a_policy_returning_no_valid_index_is_refused(bad):
    with pytest.raises(ValueError, match="index"):
        allocator.replay([("alloc", "a", 4 * KIB), ("free", "a"), ("alloc", "b", KIB)], bad)


def test_a_policy_choosing_a_too_small_block_is_refused():
    with pytest.raises(ValueError, match="bytes for a request"):
        allocator.replay([("alloc", "a", KIB), ("free", "a"), ("alloc", "b", 4 * KIB)],
                         lambda free, size: 0 if free else None)


def test_use_policy_plugs_into_the_chip_and_empty_cache_returns_split_blocks():
    toychip.device.empty_cache()
    reserved = toychip.device.memory_reserved()
    with allocator.use_policy(best_fit):
        big = torch.empty(4096, device="toychip")          # 16 KiB
        del big
        small = torch.empty(256, device="toychip")         # 1 KiB out of the cached 16 KiB block
        assert toychip.device.memory_reserved() == reserved + 16 * KIB
        assert toychip.device.memory_allocated() >= KIB
        del small
    assert allocator.ALLOCATOR.policy is None
    toychip.device.empty_cache()
    assert toychip.device.memory_reserved() == reserved
    assert toychip.device.memory_stats()["segment.all.current"] >= 0
