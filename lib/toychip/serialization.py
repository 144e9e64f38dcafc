"""``torch.save`` / ``torch.load`` of chip tensors, ``map_location`` included; ``copy.deepcopy``.

``torch.save`` writes a tensor's *storage* bytes; a Python backend has no C++ storage
(the chip's bytes live in ``storage._buf``, the C++ storage is empty), so the default
path cannot read them. PyTorch already has the path for such backends (XLA, MTIA):
pickle the tensor as a CPU copy plus its device, and rebuild it on load with
``torch._utils._rebuild_device_tensor_from_cpu_tensor``, which honours ``map_location``.
The chip routes its tensors there through :mod:`copyreg` (the standard library's hook
for pickling a type one does not own); every other tensor pickles as before.

Loading a CPU checkpoint with ``map_location="toychip"`` restores storages, not tensors:
a deserializer registered with ``torch.serialization.register_package`` puts the bytes
in a chip storage, and ``aten.set_`` (a chip memory op, see :mod:`toychip.op_table`)
types them when the tensor is rebuilt.

``copy.deepcopy`` of a chip tensor (and so of a model on the chip) copies its storage with
``UntypedStorage.clone``, which allocates ``UntypedStorage(nbytes, device="toychip")``
through the C++ allocator a Python backend does not have: in torch 2.13 that crashes the
process. The chip replaces ``clone`` for its own storages with a buffer-to-buffer copy
(torch_npu patches storage methods the same way); other storages clone as before.

Limits, as the chapter says: views that shared a storage when saved are loaded as
separate tensors, and the save copies every chip tensor to the host (a C++ backend
would write its storage directly).
"""
from __future__ import annotations

import copyreg
import pickle
import re

import torch

from . import ledger
from .memory import buffer_of, wrap
from .spec import NAME, check_index


def _reduce_tensor(t: torch.Tensor):
    """Pickle a chip tensor as (CPU copy, dtype, device, requires_grad); others as usual."""
    if t.device.type != NAME:
        return t.__reduce_ex__(pickle.DEFAULT_PROTOCOL)
    return (torch._utils._rebuild_device_tensor_from_cpu_tensor,
            (t.detach().cpu(), t.dtype, str(t.device), t.requires_grad))


def _deserialize(storage: torch.UntypedStorage, location: str):
    """``map_location="toychip"``: a host storage's bytes in a new chip storage."""
    if not re.fullmatch(rf"{NAME}(:\d+)?", location):
        return None
    check_index(location)
    host = torch.empty(0, dtype=torch.uint8).set_(storage)
    return wrap(host.numpy().copy()).untyped_storage()


def _tag(storage) -> str | None:
    return str(storage.device) if storage.device.type == NAME else None


_clone_storage = torch.UntypedStorage.clone


def _clone_chip_storage(storage: torch.UntypedStorage) -> torch.UntypedStorage:
    """``UntypedStorage.clone`` (what ``copy.deepcopy`` calls): chip storages copy their buffer."""
    if storage.device.type != NAME:
        return _clone_storage(storage)
    data = buffer_of(storage)
    if ledger.charging():
        ledger.charge_kernel("copy_", 2 * data.nbytes, 0)
    return wrap(data.copy()).untyped_storage()


_registered = False


def register() -> None:
    """Install the pickling hook, the load-time deserializer and the storage clone (idempotent)."""
    global _registered
    if _registered:
        return
    copyreg.pickle(torch.Tensor, _reduce_tensor)
    # priority 15: before PyTorch's generic PrivateUse1 deserializer (23), which needs a C++ allocator
    torch.serialization.register_package(15, _tag, _deserialize)
    torch.UntypedStorage.clone = _clone_chip_storage
    _registered = True
