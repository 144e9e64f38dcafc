"""Mirrors OpenReg's tests/test_storage.py: pinned storage, and saving and loading chip tensors.

torch.save of a chip tensor writes its bytes (as the CPU's) with the location tag
"toychip:<index>"; torch.load puts them back on that chip, or where map_location says, and
sets the tensor's backend metadata (the C++ runtime's c10::BackendMeta) from the flags saved
with it. The legacy NumPy path (torch._utils._rebuild_device_tensor_from_numpy) is written
here by a stand-in object that pickles as that call, instead of upstream's stored bytes.
"""
import _codecs
import io
from unittest import mock

import numpy as np
import pytest
import torch

import toychip  # noqa: F401  (registers the chip)

FLAGS = {"version_number": True, "format_number": True}


def round_trip(obj, **load_kwargs):
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    buffer.seek(0)
    return torch.load(buffer, **load_kwargs)


def test_rewrapped_storage():
    pinned = torch.randn(10).pin_memory()
    rewrapped = torch.tensor((), dtype=torch.float32).set_(pinned.untyped_storage()[2:], 0, (5,), (1,))
    assert rewrapped.is_pinned()
    assert rewrapped.data_ptr() != pinned.data_ptr()


def test_serialization():
    for device in ("toychip", "toychip:0"):
        assert torch.serialization.location_tag(torch.UntypedStorage(4, device=device)) == "toychip:0"
    restored = torch.serialization.default_restore_location(torch.empty(4, 4).untyped_storage(), "toychip:0")
    assert restored.is_toychip

    tensor = torch.empty(3, 3, device="toychip")
    assert torch._utils.get_tensor_metadata(tensor) == {}
    torch._utils.set_tensor_metadata(tensor, FLAGS)
    assert torch._utils.get_tensor_metadata(tensor) == FLAGS

    loaded = round_trip(tensor)
    assert loaded.is_toychip and torch._utils.get_tensor_metadata(loaded) == FLAGS
    on_cpu = round_trip(tensor, map_location="cpu")
    assert not on_cpu.is_toychip and torch._utils.get_tensor_metadata(on_cpu) == {}


class LegacyNumpyTensor:
    """Pickles as the call older torch.save wrote for a tensor of a device without storage."""

    def __init__(self, array: np.ndarray, device: str):
        self.array, self.device = array, device

    def __reduce__(self):
        return torch._utils._rebuild_device_tensor_from_numpy, (self.array, torch.float32, self.device, False)


def test_open_device_numpy_serialization():
    values = np.arange(1, 7, dtype=np.float32).reshape(2, 3)
    buffer = io.BytesIO()
    torch.save({"x": LegacyNumpyTensor(values, "toychip:0")}, buffer)
    # weights_only loading allows the rebuild function itself; NumPy's pieces must be allowed.
    numpy_globals = [values.__reduce__()[0], np.ndarray, np.dtype, type(values.dtype), _codecs.encode]
    with torch.serialization.safe_globals(numpy_globals):
        buffer.seek(0)
        loaded = torch.load(buffer, weights_only=True)
        buffer.seek(0)
        loaded_cpu = torch.load(buffer, weights_only=True, map_location="cpu")
    assert loaded["x"].device == torch.device("toychip:0")
    assert torch.equal(loaded["x"].cpu(), torch.from_numpy(values))
    assert loaded_cpu["x"].is_cpu


def test_open_device_cpu_serialization():
    x = torch.randn(2, 3)
    with mock.patch.object(torch._C, "_has_storage", return_value=False):
        on_chip = x.to("toychip")
        rebuild = on_chip._reduce_ex_internal(torch.serialization.DEFAULT_PROTOCOL)[0]
        assert rebuild is torch._utils._rebuild_device_tensor_from_cpu_tensor
        state = {"x": on_chip}
        loaded = round_trip(state, weights_only=True)
        loaded_cpu = round_trip(state, weights_only=True, map_location="cpu")
        assert not loaded["x"].is_cpu and torch.equal(loaded["x"].cpu(), x)
        assert loaded_cpu["x"].is_cpu
        with pytest.raises(RuntimeError, match="Cannot serialize tensors on backends with no storage under skip_data"):
            with torch.serialization.skip_data():
                torch.save(state, io.BytesIO())


def test_serialization_metadata_preservation():
    tensor = torch.empty(3, 3, device="toychip")
    torch._utils.set_tensor_metadata(tensor, FLAGS)
    assert torch._utils.get_tensor_metadata(round_trip(tensor)) == FLAGS


def test_serialization_map_location_cpu():
    tensor = torch.randn(3, 3, device="toychip")
    loaded = round_trip(tensor, map_location="cpu")
    assert loaded.is_cpu and torch.equal(loaded, tensor.cpu())


def test_serialization_map_location_device():
    tensor = torch.randn(3, 3, device="toychip:0")
    loaded = round_trip(tensor, map_location="toychip:1")
    assert loaded.device == torch.device("toychip:1")
    assert torch.equal(loaded.cpu(), tensor.cpu())


def test_serialization_storage_location_tag():
    assert torch.serialization.location_tag(torch.UntypedStorage(4, device="toychip:1")) == "toychip:1"
    assert torch.serialization.location_tag(torch.UntypedStorage(4, device="toychip")) == "toychip:0"


def test_serialization_default_restore_location():
    on_cpu = torch.empty(4, 4).untyped_storage()
    for index in (0, 1):
        restored = torch.serialization.default_restore_location(on_cpu, f"toychip:{index}")
        assert restored.is_toychip and restored.device == torch.device("toychip", index)
