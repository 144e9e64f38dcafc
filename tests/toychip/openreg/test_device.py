"""Mirrors OpenReg's tests/test_device.py: devices through torch.accelerator, capabilities, fork.

Upstream's capability test expects every dtype (complex32 and the quantized ones too);
the toy chip reports the dtypes it really stores (toychip.dtypes.BUFFER_DTYPE), so the mirror
checks that list, and that each dtype in it can be allocated and converted on the chip.
"""
import multiprocessing

import pytest
import torch

import toychip  # noqa: F401  (registers the chip)
from toychip.dtypes import BUFFER_DTYPE

DEVICES = 2


@pytest.fixture(autouse=True)
def restore_current_device():
    index = torch.accelerator.current_device_index()
    yield
    torch.accelerator.set_device_index(index)


def test_device_count():
    assert torch.accelerator.device_count() == DEVICES


def test_device_switch():
    for index in (1, 0):
        torch.accelerator.set_device_index(index)
        assert torch.accelerator.current_device_index() == index


def test_device_context():
    before = torch.accelerator.current_device_index()
    with torch.accelerator.device_index(None):  # None: stays where it is
        assert torch.accelerator.current_device_index() == before
    with torch.accelerator.device_index(1):
        assert torch.accelerator.current_device_index() == 1
    assert torch.accelerator.current_device_index() == before


def test_invalid_device_index():
    with pytest.raises(RuntimeError, match="The device index is out of range"):
        torch.accelerator.set_device_index(DEVICES)


def test_device_capability():
    supported = torch.accelerator.get_device_capability("toychip:0")["supported_dtypes"]
    assert set(supported) == set(BUFFER_DTYPE)
    assert torch.complex64 not in supported and torch.quint8 not in supported
    for dtype in supported:
        x = torch.ones(3, dtype=dtype, device="toychip:0")
        assert x.to(torch.float32).cpu().tolist() == [1.0, 1.0, 1.0], dtype


def test_device_properties():
    first = torch.device("toychip:0")
    assert (first.type, first.index) == ("toychip", 0)
    unindexed = torch.device("toychip")
    assert (unindexed.type, unindexed.index) == ("toychip", None)


def test_tensor_device():
    assert torch.randn(2, 3, device="toychip").device.type == "toychip"
    second = torch.randn(2, 3, device="toychip:1")
    assert (second.device.type, second.device.index) == ("toychip", 1)


def test_device_guard():
    before = torch.accelerator.current_device_index()
    with torch.accelerator.device_index(1):
        assert torch.accelerator.current_device_index() == 1
    assert torch.accelerator.current_device_index() == before


def test_device_switch_persistence():
    torch.accelerator.set_device_index(1)
    first = torch.randn(2, 3, device="toychip")
    second = torch.randn(3, 3, device="toychip")
    assert first.device.index == second.device.index == 1


def test_device_count_consistency():
    count = torch.accelerator.device_count()
    assert count == DEVICES
    for index in range(count):
        torch.accelerator.set_device_index(index)
        assert torch.accelerator.current_device_index() == index


def _use_the_chip_in_a_forked_child(results):
    """Runs in the child: what initialising the chip and making a chip tensor raise there."""
    for attempt in (torch.toychip.init, lambda: torch.ones(1, device="toychip")):
        try:
            attempt()
            results.put(None)
        except RuntimeError as error:
            results.put(str(error))


def test_device_poison_fork():
    torch.toychip.init()
    assert torch.toychip.is_initialized()
    context = multiprocessing.get_context("fork")
    results = context.Queue()
    child = context.Process(target=_use_the_chip_in_a_forked_child, args=(results,))
    child.start()
    errors = [results.get(timeout=60), results.get(timeout=60)]
    child.join(timeout=60)
    assert child.exitcode == 0
    expected = ("Cannot re-initialize toychip in forked subprocess. To use toychip with "
                "multiprocessing, you must use the 'spawn' start method")
    assert errors == [expected, expected]
    assert torch.toychip.is_initialized()  # the parent is not affected
