"""Mirrors OpenReg's test_ipc.py: chip tensors sent to another process through multiprocessing (spawn).

Upstream starts a producer and a consumer process per test. Here the test process is the
producer and one spawned peer (``ipc_peer``, shared by the module: spawning imports torch)
is the consumer; the limbo test, where the producer must exit, spawns a producer and the
test process consumes. OpenReg refuses to re-share a received storage in
``UntypedStorage._share_device_``, which torch 2.13 does not have; on 2.13 sharing is
pickling, so the mirror sends the received tensor on.
"""
import multiprocessing

import ipc_peer
import pytest
import torch


@pytest.fixture(scope="module")
def peer():
    process = ipc_peer.Peer()
    yield process
    assert process.close() == 0


def test_basic_tensor_roundtrip(peer):
    t = torch.arange(1.0, 5.0, device="toychip:0")
    got = peer.call("describe", t)
    assert (got["device"], got["dtype"], got["values"]) == ("toychip:0", torch.float32, [1.0, 2.0, 3.0, 4.0])


def test_offset_tensor_roundtrip(peer):
    base = torch.arange(0.0, 8.0, device="toychip:0")
    got = peer.call("describe", base[4:])
    assert (got["values"], got["offset"], got["size"], got["stride"]) == ([4.0, 5.0, 6.0, 7.0], 4, [4], [1])


def test_strided_tensor_roundtrip(peer):
    base = torch.arange(0.0, 8.0, device="toychip:0")
    got = peer.call("describe", base[::2])
    assert (got["values"], got["offset"], got["size"], got["stride"]) == ([0.0, 2.0, 4.0, 6.0], 0, [4], [2])


def test_received_via_ipc_cannot_be_reshared(peer):
    message = peer.call("reshare", torch.arange(1.0, 5.0, device="toychip:0"))
    assert message is not None, "a received storage was shared again"
    assert "received from another process" in message


def test_producer_exits_cleanly_with_tensor_in_limbo():
    context = multiprocessing.get_context("spawn")
    tensors, received = context.Queue(), context.Event()
    producer = context.Process(target=ipc_peer.produce_then_exit, args=(tensors, received))
    producer.start()
    try:
        t = tensors.get(timeout=ipc_peer.TIMEOUT_S)
        received.set()
        producer.join(ipc_peer.TIMEOUT_S)
        assert not producer.is_alive(), "the producer hung after dropping a tensor another process holds"
        assert producer.exitcode == 0
        assert t.tolist() == [1.0, 2.0, 3.0, 4.0]  # the pages outlive the process that made them
    finally:
        if producer.is_alive():
            producer.kill()
