"""Chip tensors through torch.multiprocessing (toychip.ipc): what arrives, shared memory, lifetime.

Most checks pickle with ``ForkingPickler`` and load in this process (the load maps the pages
again, as a receiver does); the cross-process ones use one spawned ``ipc_peer``.
"""
import gc
import os
import pickle
from multiprocessing.reduction import ForkingPickler

import ipc_peer
import pytest
import torch
import torch.multiprocessing

import toychip


def sent(value):
    """``value`` after a trip through a multiprocessing queue's pickler."""
    return pickle.loads(ForkingPickler.dumps(value))


def own_segments() -> set[str]:
    """This process's shared-memory segments in /dev/shm (torch names them torch_<pid>_...)."""
    return {name for name in os.listdir("/dev/shm") if name.startswith(f"torch_{os.getpid()}_")}


@pytest.fixture(scope="module")
def peer():
    process = ipc_peer.Peer()
    yield process
    assert process.close() == 0


@pytest.fixture
def file_system_strategy():
    """Segments with names in /dev/shm, so their lifetime can be watched."""
    before = torch.multiprocessing.get_sharing_strategy()
    torch.multiprocessing.set_sharing_strategy("file_system")
    yield
    torch.multiprocessing.set_sharing_strategy(before)


def test_a_view_arrives_on_its_chip_with_its_size_stride_and_offset():
    base = torch.arange(12.0, device="toychip:1").reshape(3, 4)
    view = base[1:, ::2]
    got = sent(view)
    assert (got.device, got.dtype) == (torch.device("toychip:1"), torch.float32)
    assert (got.shape, got.stride(), got.storage_offset()) == (view.shape, view.stride(), view.storage_offset())
    assert torch.equal(got.cpu(), view.cpu())


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.int64, torch.int8, torch.bool])
def test_every_stored_dtype_arrives_intact(dtype):
    t = torch.tensor([0, 1, 1, 0, 1], device="toychip").to(dtype)
    got = sent(t)
    assert got.dtype == dtype
    assert torch.equal(got.cpu(), t.cpu())
    assert torch.equal((got + got).cpu(), (t + t).cpu())  # the kernels read the received memory


def test_a_parameter_arrives_as_a_parameter_that_requires_grad():
    got = sent(torch.nn.Parameter(torch.ones(3, device="toychip")))
    assert isinstance(got, torch.nn.Parameter) and got.requires_grad


def test_an_empty_tensor_arrives_empty_on_its_chip():
    got = sent(torch.empty(0, 2, device="toychip:1"))
    assert (got.shape, got.device) == ((0, 2), torch.device("toychip:1"))


def test_cpu_tensors_keep_torchs_own_sharing():
    got = sent(torch.arange(3.0))
    assert got.device.type == "cpu" and got.is_shared()
    assert got.tolist() == [0.0, 1.0, 2.0]


def test_the_memory_moves_into_shared_pages_once():
    t = torch.arange(4.0, device="toychip")
    sent(t)
    address = t.data_ptr()
    sent(t[1:])
    assert t.data_ptr() == address
    assert t.tolist() == [0.0, 1.0, 2.0, 3.0]


def test_sharing_moves_memory_without_allocating_more():
    """The sender's memory moves into shared pages; the receiver maps them, allocating nothing."""
    t = torch.arange(1000.0, device="toychip")
    before = torch.toychip.memory_allocated()
    got = sent(t)
    assert torch.toychip.memory_allocated() == before
    assert got.tolist() == t.tolist()


def test_a_pending_lazy_result_is_computed_before_it_is_sent():
    x = torch.ones(3, device="toychip")
    with toychip.lazy():
        y = x * 2
        got = sent(y)
    assert got.tolist() == [2.0, 2.0, 2.0]


def test_a_received_storage_cannot_be_shared_again():
    got = sent(torch.ones(2, device="toychip"))
    with pytest.raises(RuntimeError, match="received from another process"):
        ForkingPickler.dumps(got)


def test_writes_are_seen_by_both_processes(peer):
    t = torch.arange(4.0, device="toychip:1")
    peer.call("hold", t)
    try:
        peer.call("double_held")
        assert t.tolist() == [0.0, 2.0, 4.0, 6.0]
        t.add_(1)
        assert peer.call("held_values") == [[1.0, 3.0, 5.0, 7.0]]
    finally:
        peer.call("release")


def test_shared_pages_live_while_either_process_holds_them_then_are_unlinked(peer, file_system_strategy):
    t = torch.arange(4.0, device="toychip")
    peer.call("hold", t)
    segments = own_segments()
    assert segments, "the chip tensor was not moved into shared memory"
    del t
    gc.collect()
    assert peer.call("held_values") == [[0.0, 1.0, 2.0, 3.0]]
    assert own_segments() == segments
    peer.call("release")
    assert not own_segments() & segments, "a shared segment outlived both processes' tensors"

