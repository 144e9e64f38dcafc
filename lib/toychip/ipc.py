"""Chip tensors through ``torch.multiprocessing``: a storage sent to another process moves
into POSIX shared memory, and the receiver gets a chip storage over the same pages.

A tensor put on a multiprocessing queue is pickled by ``ForkingPickler`` with the reducers
that ``torch.multiprocessing.reductions.init_reductions`` registers. For a CPU tensor the
storage's memory moves into shared memory (what ``share_memory_`` does) and only a handle
travels; CUDA sends an IPC handle of its allocation. torch 2.13 has no path for any other
device (newer torch adds ``UntypedStorage._share_device_`` for PrivateUse1 backends such as
OpenReg), so without this module a chip tensor fails in the producer ("_share_fd_: only
available on CPU").

The toy chip's memory is host memory, so the chip shares it the way the CPU does. Only the
storage reducer is replaced, and only for chip storages: torch's tensor reducer still sends
size, stride, storage offset, dtype and ``requires_grad`` (and rebuilds a ``Parameter``), and
its storage reducer still handles everything else. When a chip storage is first sent, its
bytes move into a shared CPU storage (``UntypedStorage._new_shared``: torch's sharing
strategy) that becomes the chip storage's memory; that CPU storage is what is pickled, and
the receiver makes a chip storage on the same device over the same pages, so writes on
either side are seen by the other::

    producer: chip storage -> shared pages (CPU storage)  --handle-->  receiver: chip storage
              (the same memory, moved once)                            (over the same pages)

Lifetime is CPU sharing's: each side's storage keeps its own mapping, so the pages live while
either side holds them, and nothing is left in /dev/shm (the file_descriptor strategy unlinks
the segment as soon as it is made; file_system's manager unlinks it after the last user).
As with CPU tensors, the memory moves when the queue's feeder thread pickles the tensor, and
the producer must stay alive until the tensor has been received. A storage received from
another process is not sent on (as OpenReg refuses it): share the original instead.
"""
from __future__ import annotations

import numpy as np
import torch
from multiprocessing.reduction import ForkingPickler
from torch.multiprocessing import reductions

from . import memory, runtime
from .spec import NAME


def reduce_storage(storage: torch.UntypedStorage):
    """``ForkingPickler``'s reducer for ``UntypedStorage``: chip storages here, the rest torch's."""
    if storage.device.type != NAME:
        return reductions.reduce_storage(storage)
    if storage.nbytes() == 0:  # no pages to map, as torch's reducer special-cases too
        return rebuild_storage, (None, storage.device.index, np.dtype(np.uint8))
    pages = _shared_pages(storage)
    return rebuild_storage, (pages, storage.device.index, storage._buf.dtype)


def _shared_pages(storage: torch.UntypedStorage) -> torch.UntypedStorage:
    """The shared CPU storage holding ``storage``'s memory; the memory moves there the first time."""
    if getattr(storage, "_received_via_ipc", False):
        raise RuntimeError(
            f"toychip: this storage of {storage.nbytes()} bytes on {storage.device} was received from another "
            "process and cannot be shared again; share the original from the process that made it")
    pages = getattr(storage, "_ipc_pages", None)
    if pages is not None and pages.data_ptr() == storage.data_ptr():
        return pages
    buf = memory.buffer_of(storage)  # a pending lazy graph runs first
    pages = torch.UntypedStorage._new_shared(storage.nbytes())
    shared = _bytes_of(pages).view(buf.dtype)
    np.copyto(shared, buf)
    memory.replace_memory(storage, shared, counted=False, alias=True)
    storage._ipc_pages = pages
    return pages


def rebuild_storage(pages: torch.UntypedStorage | None, device: int, buffer_dtype: np.dtype) -> torch.UntypedStorage:
    """The receiver's chip storage on ``toychip:device`` over the sender's shared ``pages``.

    The pages were allocated in the sender, so the receiver's caching allocator does not book
    them (as memory opened from a CUDA IPC handle is not in ``memory_allocated``).
    """
    if pages is None:
        return torch.UntypedStorage(0, device=f"{NAME}:{device}")
    storage = runtime.adopt(_bytes_of(pages), torch.uint8, device).untyped_storage()
    memory.attach(storage, buffer_dtype, booked=False, counted=False)
    storage._received_via_ipc = True
    return storage


def _bytes_of(pages: torch.UntypedStorage) -> np.ndarray:
    """A CPU storage's bytes as a NumPy array that keeps the storage (and its mapping) alive."""
    return torch.empty(0, dtype=torch.uint8).set_(pages).numpy()


def register() -> None:
    """Send chip storages (and so chip tensors) through multiprocessing queues (idempotent)."""
    ForkingPickler.register(torch.UntypedStorage, reduce_storage)
