"""Does the race report find what PyTorch's CUDA sanitizer finds: unsynchronised cross-stream accesses?"""
import warnings

import pytest
import torch

import toychip
from toychip import RaceError, RaceWarning, races

tc = torch.toychip


@pytest.fixture(autouse=True)
def synchronized_after():
    """Each test ends with the host waiting for every stream, so its tensors race with nothing later."""
    yield
    tc.synchronize()


@pytest.fixture
def side():
    """A side stream that has waited for everything the default stream did so far."""
    stream = tc.Stream()
    stream.wait_stream(tc.current_stream())
    return stream


def copy_on(stream, host):
    with tc.stream(stream):
        return host.to("toychip", non_blocking=True)


def test_reading_a_copy_without_wait_stream_warns_naming_the_op_and_both_streams(side):
    nxt = copy_on(side, torch.randn(8, 8).pin_memory())
    with pytest.warns(RaceWarning, match=rf"aten.relu.default on toychip:0 stream 0 reads tensor \(8, 8\) "
                                         rf"float32.*aten._copy_from.default on toychip:0 stream {side.stream_id}.*数据竞争"):
        torch.relu(nxt)


SYNCS = {
    "wait_stream": lambda side: tc.current_stream().wait_stream(side),
    "event": lambda side: tc.current_stream().wait_event(side.record_event()),
    "stream_synchronize": lambda side: side.synchronize(),
    "device_synchronize": lambda side: tc.synchronize(),
    "event_synchronize": lambda side: side.record_event().synchronize(),
    "accelerator_synchronize": lambda side: torch.accelerator.synchronize(),
}


@pytest.mark.parametrize("sync", SYNCS)
def test_waiting_for_the_stream_removes_the_race(side, sync):
    nxt = copy_on(side, torch.randn(8, 8).pin_memory())
    SYNCS[sync](side)
    with toychip.sanitizer("strict"):
        torch.relu(nxt)


@pytest.mark.parametrize("sync", ["stream_synchronize", "event_synchronize", "accelerator_synchronize"])
def test_a_host_synchronisation_makes_later_work_start_after_the_copy_on_the_clock(side, sync):
    def run(wait):
        with toychip.profile() as p:
            copy_on(side, host)
            wait(side)
            torch.relu(torch.ones(8, device="toychip"))
        return p

    host = torch.randn(256, 256).pin_memory()
    assert run(lambda side: None).elapsed_us < run(lambda side: None).time_us     # unsynchronised: they overlap
    synchronised = run(SYNCS[sync])
    assert synchronised.elapsed_us == pytest.approx(synchronised.time_us)        # the kernels waited for the copy


def test_event_synchronize_waits_only_for_work_queued_before_the_record(side):
    copy_on(side, torch.randn(8).pin_memory())
    recorded = side.record_event()
    later = copy_on(side, torch.randn(8).pin_memory())
    recorded.synchronize()
    with toychip.sanitizer("strict"), pytest.raises(RaceError, match="aten._copy_from.default"):
        torch.relu(later)


def test_accelerator_synchronize_waits_only_for_its_own_chip():
    other = tc.Stream(device=1)
    with tc.stream(other):
        on_chip_1 = torch.randn(8).pin_memory().to("toychip:1", non_blocking=True)
    torch.accelerator.synchronize(0)
    with toychip.sanitizer("strict"), pytest.raises(RaceError, match="toychip:1 stream 0 reads"):
        torch.relu(on_chip_1)


def test_strict_mode_raises_and_off_is_silent(side):
    nxt = copy_on(side, torch.randn(8).pin_memory())
    with toychip.sanitizer("strict"), pytest.raises(RaceError, match="add.Tensor"):
        nxt + 1
    with toychip.sanitizer("off"), warnings.catch_warnings():
        warnings.simplefilter("error")
        nxt + 1


def test_a_blocking_copy_is_no_race_the_host_waited(side):
    for host in (torch.randn(8), torch.randn(8).pin_memory()):
        with tc.stream(side):
            nxt = host.to("toychip", non_blocking=False)
        with toychip.sanitizer("strict"):
            nxt * 2


def test_a_non_blocking_copy_from_pageable_memory_still_races(side):
    """cudaMemcpyAsync from pageable memory may return before the data has arrived."""
    nxt = copy_on(side, torch.randn(8))
    with toychip.sanitizer("strict"), pytest.raises(RaceError, match="aten.mul.Tensor on toychip:0 stream 0 reads"):
        nxt * 2


def test_a_race_names_the_kernel_that_wrote_the_tensor(side):
    with tc.stream(side):
        made = torch.ones(8, device="toychip").exp()
    with toychip.sanitizer("strict"), pytest.raises(RaceError, match="used by aten.exp.default on"):
        torch.relu(made)


def test_writing_in_place_what_another_stream_reads_is_a_race(side):
    x = torch.ones(8, device="toychip")
    side.wait_stream(tc.current_stream())
    with tc.stream(side):
        y = x * 2                                  # side reads x
    with toychip.sanitizer("strict"), pytest.raises(RaceError, match="add_.Tensor on toychip:0 stream 0 writes"):
        x.add_(1)                                  # default writes x without waiting for the read
    del y


def test_a_block_freed_without_record_stream_and_handed_out_again_is_a_race(side):
    host = torch.randn(1024).pin_memory()
    nxt = copy_on(side, host)                      # allocated on the side stream
    tc.current_stream().wait_stream(side)
    nxt.exp()                                      # used on the default stream
    del nxt                                        # back to the side stream's cache at once
    with toychip.sanitizer("strict"), pytest.raises(RaceError, match="record_stream"):
        copy_on(side, host)


def test_record_stream_keeps_the_block_until_the_host_waited_for_that_stream(side):
    host = torch.randn(1024).pin_memory()
    nxt = copy_on(side, host)
    tc.current_stream().wait_stream(side)
    nxt.exp()
    nxt.record_stream(tc.current_stream())
    del nxt
    assert "active_pending_free" in [b["state"] for b in tc.memory_snapshot()]
    before = tc.memory_stats()
    with toychip.sanitizer("strict"):
        again = copy_on(side, host)                # the pending block is not handed out: a new one
    after = tc.memory_stats()
    assert after["num_device_alloc"] == before["num_device_alloc"] + 1
    assert after["active_bytes.all.current"] - after["allocated_bytes.all.current"] == 4096
    tc.synchronize()                               # the host waited: at the next allocation the block
    with toychip.sanitizer("strict"):             # joins the cache (c10's process_events) and is reused
        third = copy_on(side, host)
    assert tc.memory_stats()["num_device_alloc"] == after["num_device_alloc"]
    assert "active_pending_free" not in [b["state"] for b in tc.memory_snapshot()]
    del again, third


def test_the_mode_comes_from_toychip_sanitizer_and_bad_values_are_refused(monkeypatch):
    monkeypatch.setenv("TOYCHIP_SANITIZER", "STRICT")
    assert races._mode_from_env() == "strict"
    monkeypatch.setenv("TOYCHIP_SANITIZER", "loud")
    with pytest.raises(ValueError, match="off, warn, strict"):
        races._mode_from_env()
    with pytest.raises(ValueError, match="off, warn, strict"), toychip.sanitizer("on"):
        pass


def test_watching_starts_clean_and_collects_races_even_when_strict_mode_errors_are_caught(side):
    left = copy_on(side, torch.randn(8).pin_memory())     # nothing waited for it before the block
    with races.watching() as reports, toychip.sanitizer("strict"):
        torch.relu(left)                                   # the block starts after the host waited
        nxt = copy_on(side, torch.randn(8).pin_memory())
        with pytest.raises(RaceError):
            torch.relu(nxt)
    assert len(reports) == 1 and "relu.default" in reports[0]


def test_watching_records_what_runs_before_the_first_side_stream_op(monkeypatch, side):
    monkeypatch.setattr(races, "_watching", False)        # as in a process that never used a side stream
    with races.watching() as reports:
        buffer = torch.zeros(8, device="toychip")          # written on the default stream
        with tc.stream(side), pytest.warns(RaceWarning):
            buffer.copy_(torch.randn(8).pin_memory(), non_blocking=True)
    assert len(reports) == 1 and "writes" in reports[0]


@pytest.fixture
def unwatched(monkeypatch):
    """The report as a fresh process has it: nothing recorded until a side stream is first used."""
    tc.synchronize()
    monkeypatch.setattr(races, "_watching", False)
    monkeypatch.setattr(races, "_unwatched", set())
    monkeypatch.setattr(races, "_earlier", {})


def test_a_tensor_made_before_the_first_side_stream_races_when_read_there_without_waiting(unwatched):
    made = torch.ones(8, device="toychip") * 2
    side = tc.Stream()
    with pytest.warns(RaceWarning, match=rf"reads tensor \(8,\).*{races.EARLIER_WORK} on toychip:0 stream 0"):
        with tc.stream(side):
            made + 1


UNWATCHED_SYNCS = {
    "wait_stream": lambda side, made: side.wait_stream(tc.current_stream()),
    "device_synchronize": lambda side, made: tc.synchronize(),
    "blocking_copy_to_the_host": lambda side, made: made.cpu(),
}


@pytest.mark.parametrize("sync", UNWATCHED_SYNCS)
def test_a_tensor_made_before_the_first_side_stream_is_no_race_once_waited_for(unwatched, sync):
    made = torch.ones(8, device="toychip") * 2
    side = tc.Stream()
    UNWATCHED_SYNCS[sync](side, made)
    with toychip.sanitizer("strict"), tc.stream(side):
        made + 1
