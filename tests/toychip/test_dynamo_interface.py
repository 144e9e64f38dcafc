"""Does Dynamo find the chip's device interface, and does compiling still work with it?"""
import torch
from torch._dynamo.device_interface import get_interface_for_device

import toychip
import toychip.compiler  # noqa: F401  (loading the backend registers the interface)
from toychip.dynamo_interface import ToychipInterface


def test_dynamo_returns_the_toychip_interface_for_the_device_and_its_indices():
    assert get_interface_for_device("toychip") is ToychipInterface
    assert get_interface_for_device(torch.device("toychip", 0)) is ToychipInterface
    assert get_interface_for_device("toychip:0") is ToychipInterface


def test_interface_answers_from_the_device_module_streams_and_memory():
    chip = get_interface_for_device("toychip")
    assert chip.is_available() and chip.device_count() == torch.toychip.device_count()
    assert chip.current_device() == 0 and chip.exchange_device(0) == 0
    assert chip.get_device_properties(0) is toychip.spec.get_spec()
    assert chip.memory_allocated() == torch.toychip.memory_allocated()
    side = chip.Stream()
    with chip.stream(side):
        assert chip.current_stream() == side and chip.get_raw_stream(0) == side.stream_id
    assert chip.current_stream() == torch.toychip.default_stream()
    event = chip.Event()
    event.record()
    chip.synchronize()
    assert event.query()


def test_compiled_function_on_the_chip_still_works_with_the_interface_registered():
    x = torch.randn(4, 5)
    torch._dynamo.reset()
    compiled = torch.compile(lambda t: torch.relu(t * 2 + 1).sum(dim=0), backend="toychip")
    torch.testing.assert_close(compiled(x.to("toychip")).cpu(), torch.relu(x * 2 + 1).sum(dim=0))
    assert get_interface_for_device("toychip") is ToychipInterface
