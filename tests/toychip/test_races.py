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
                                         rf"float32.*_copy_from on toychip:0 stream {side.stream_id}.*数据竞争"):
        torch.relu(nxt)


@pytest.mark.parametrize("sync", ["wait_stream", "event", "stream_synchronize", "device_synchronize"])
def test_waiting_for_the_stream_removes_the_race(side, sync):
    nxt = copy_on(side, torch.randn(8, 8).pin_memory())
    if sync == "wait_stream":
        tc.current_stream().wait_stream(side)
    elif sync == "event":
        tc.current_stream().wait_event(side.record_event())
    elif sync == "stream_synchronize":
        side.synchronize()
    else:
        tc.synchronize()
    with toychip.sanitizer("strict"):
        torch.relu(nxt)


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
            nxt = host.to("toychip", non_blocking=not host.is_pinned())   # pageable, or not non_blocking
        with toychip.sanitizer("strict"):
            nxt * 2


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
