"""Device memory: NumPy buffers owned by the tensor's *storage*, and views that alias them.

A toychip tensor is an ordinary ``torch.Tensor`` on ``toychip:0`` whose storage carries
the chip's memory as a flat NumPy array in ``storage._buf``. Views (``view``, ``t()``,
slicing) are new tensors over the *same* storage object with other sizes/strides/offset,
so writing through a view writes the base, exactly as on a real device::

    buf = t.untyped_storage()._buf             # flat chip memory
    t[i, j] == buf[offset + i*stride0 + j*stride1]

Why the storage and not the tensor: autograd saves C++ shallow copies of tensors, which
drop Python attributes; the storage object is shared by all of them.

Used in chapter 08 (a device allocator) and chapter 04 (a lazy storage has ``_lazy``
instead of ``_buf`` until it is materialised).

Memory accounting (chapter 06: what saving activations for the backward costs): while a
``toychip.profile()`` is open (:mod:`toychip.ledger` keeps the open ones), every fresh
buffer a tensor gets is charged to it until the buffer is freed, giving the profile's
``allocated_bytes``, ``live_bytes`` and ``peak_bytes``. Buffers that existed before the
block (parameters, inputs) are not counted; neither are the scratch arrays *inside* one
compiled program -- what a program returns is -- nor, for now, the buffers lazy mode
materialises.

Every fresh buffer, inside a profile or not, is also booked by the caching allocator
(:mod:`toychip.allocator`: blocks, size classes, ``memory_allocated``/``memory_reserved``).
"""
from __future__ import annotations

import weakref

import numpy as np
import torch

from . import ledger
from .allocator import ALLOCATOR
from .dtypes import BUFFER_DTYPE, COMPUTE_DTYPE, TORCH_DTYPE

# The dtypes kernels compute in directly (see toychip.dtypes for float16/bfloat16).
NUMPY_DTYPE = COMPUTE_DTYPE

_create_empty = torch._C._acc.create_empty_tensor
_META_KEYS = torch._C.DispatchKeySet(torch._C.DispatchKey.Meta)
_set_storage = torch.ops.aten.set_.source_Storage_storage_offset
_np_as_strided = np.lib.stride_tricks.as_strided


class DeviceMismatchError(RuntimeError):
    """A CPU tensor reached a chip kernel (the op mixed toychip and CPU tensors)."""


# Set by :mod:`toychip.lazy`: called with a storage whose data is still a pending graph.
_materializer = None


# ids of the buffers being counted; an id leaves when its buffer is freed.
_counted: set[int] = set()


def count_buffer(array: np.ndarray) -> None:
    """Charge a fresh buffer to every open profile until NumPy frees it.

    A view (``array.base`` set) is memory that is already there, so it is never charged.
    """
    if array.base is not None or id(array) in _counted:
        return
    nbytes, counters = array.nbytes, ledger.open_profiles()
    for c in counters:
        c.allocated_bytes += nbytes
        c.live_bytes += nbytes
        if c.live_bytes > c.peak_bytes:
            c.peak_bytes = c.live_bytes
    _counted.add(id(array))
    weakref.finalize(array, _release, id(array), nbytes, counters).atexit = False


def hold(storage, array: np.ndarray, counted: bool = True) -> None:
    """``storage``'s device memory is now ``array``: its flat buffer, the caching allocator's
    block for it (``storage._block``, returned to the cache when the storage dies; always
    booked, like ``torch.cuda.memory_allocated``), and open profiles count it.
    ``counted=False``: memory already on the chip (see :func:`wrap`), not booked again."""
    storage._buf = array if array.ndim == 1 else array.reshape(-1)
    storage._block = lease(array) if counted else None
    if counted and ledger.charging():
        count_buffer(array)


def lease(array: np.ndarray):
    """The allocator's block for a fresh buffer (``None`` for a view: its memory is booked)."""
    return ALLOCATOR.lease(array) if array.base is None else None


def _release(key: int, nbytes: int, counters: tuple) -> None:
    _counted.discard(key)
    for c in counters:
        c.live_bytes -= nbytes


def set_materializer(fn) -> None:
    """Install the function that turns a lazy storage into a real buffer (chapter 04)."""
    global _materializer
    _materializer = fn


def check_dtype(dtype: torch.dtype) -> np.dtype:
    """The NumPy dtype for ``dtype``, or a clear error if the chip has no such type."""
    try:
        return BUFFER_DTYPE[dtype]
    except KeyError:
        names = ", ".join(str(d) for d in BUFFER_DTYPE)
        raise TypeError(f"toychip does not support dtype {dtype}; supported dtypes: {names}") from None


def wrap(array, counted: bool = True) -> torch.Tensor:
    """A new toychip tensor owning ``array`` (copied to C order only if it is not already).

    ``counted=False``: ``array`` is a view of memory already on the chip, copied only
    because a toychip buffer is flat; the copy is not charged as new device memory.
    """
    array = np.asarray(array, order="C")
    try:
        dtype = TORCH_DTYPE[array.dtype]
    except KeyError:
        raise TypeError(f"toychip kernel produced unsupported dtype {array.dtype}") from None
    t = _create_empty(array.shape, dtype)
    hold(t.untyped_storage(), array, counted)
    return t


def storage_nelems(size, stride) -> int:
    """Elements a storage needs to hold a tensor of ``size``/``stride`` at offset 0."""
    if any(s == 0 for s in size):
        return 0
    return 1 + sum((s - 1) * st for s, st in zip(size, stride))


def allocate(size, stride, dtype: torch.dtype) -> torch.Tensor:
    """``empty_strided`` on the chip: a fresh buffer, then a view with the asked strides."""
    np_dtype = check_dtype(dtype)
    size, stride = list(size), list(stride)
    if stride == contiguous_strides(size):
        t = _create_empty(size, dtype)
        hold(t.untyped_storage(), np.empty(storage_nelems(size, stride), np_dtype))
        return t
    base = wrap(np.empty(storage_nelems(size, stride), np_dtype))
    return alias(base, size, stride, 0)


def contiguous_strides(size) -> list[int]:
    """Row-major strides of ``size`` (the strides ``torch.empty(size)`` would get)."""
    strides, acc = [], 1
    for s in reversed(size):
        strides.append(acc)
        acc *= max(s, 1)
    return strides[::-1]


def alias(t: torch.Tensor, size, stride, offset: int) -> torch.Tensor:
    """A view of ``t``'s storage with new metadata; no data moves (``as_strided``).

    The metadata is set by the Meta kernel of ``aten.set_``, which only rewrites
    sizes/strides/offset and the storage pointer; the storage object, and so the NumPy
    buffer, is shared.
    """
    out = _create_empty([0], t.dtype)
    _set_storage.redispatch(_META_KEYS, out, t.untyped_storage(), offset, size, stride)
    return out


def restride(t: torch.Tensor, size, stride, offset: int) -> torch.Tensor:
    """``as_strided_`` on the chip: new metadata for ``t`` itself over the same buffer.

    CPU's kernel checks the view against the C++ storage size, which is 0 here (the data
    lives in ``_buf``), so the Meta kernel sets the metadata instead, as in :func:`alias`.
    """
    _set_storage.redispatch(_META_KEYS, t, t.untyped_storage(), offset, size, stride)
    return t


def set_storage(t: torch.Tensor, storage, offset: int, size, stride) -> torch.Tensor:
    """``t.set_(storage, ...)``: ``t`` views ``storage``. Bytes restored by ``torch.load``
    arrive as a uint8 buffer; they take ``t``'s dtype here (the bytes are not copied)."""
    buf = storage._buf
    np_dtype = check_dtype(t.dtype)
    if buf.dtype != np_dtype:
        storage._buf = buf.view(np_dtype)
    _set_storage.redispatch(_META_KEYS, t, storage, offset, size, stride)
    return t


def resize(t: torch.Tensor, size) -> torch.Tensor:
    """``resize_`` on the chip: contiguous ``size``, keeping the data; the buffer grows if needed."""
    size = list(size)
    storage = t.untyped_storage()
    needed = t.storage_offset() + storage_nelems(size, contiguous_strides(size))
    if needed > storage._buf.size:
        grown = np.empty(needed, storage._buf.dtype)
        grown[:storage._buf.size] = storage._buf
        hold(storage, grown)
    return restride(t, size, contiguous_strides(size), t.storage_offset())


def rebind(t: torch.Tensor, array: np.ndarray) -> torch.Tensor:
    """Point ``t`` (in place) at a fresh buffer holding ``array``: ``resize_`` and ``out=`` results."""
    array = np.asarray(array, order="C")
    storage = t.untyped_storage()
    hold(storage, array)
    _set_storage.redispatch(_META_KEYS, t, storage, 0, array.shape, contiguous_strides(array.shape))
    return t


def buffer_of(storage) -> np.ndarray:
    """A chip storage's flat buffer, running its pending lazy graph first if it has one."""
    if not hasattr(storage, "_buf") and hasattr(storage, "_lazy") and _materializer is not None:
        _materializer(storage)
    return storage._buf


def as_numpy(t: torch.Tensor) -> np.ndarray:
    """The NumPy view of a toychip tensor: its storage buffer seen with its strides.

    Hot path of every eager kernel, so the common case (contiguous) is three C calls.
    """
    try:
        buf = t.untyped_storage()._buf
    except AttributeError:
        return _as_numpy_slow(t)
    if t.is_contiguous():
        off = t.storage_offset()
        return buf[off:off + t.numel()].reshape(t.shape)
    offset = t.storage_offset()
    if offset + storage_nelems(t.shape, t.stride()) > buf.size:  # as_strided does not check
        raise RuntimeError(f"toychip: a view of size {tuple(t.shape)}, stride {t.stride()} and offset "
                           f"{offset} reaches past its storage of {buf.size} elements")
    size = buf.itemsize
    return _np_as_strided(buf[offset:], t.shape, [s * size for s in t.stride()])


def _as_numpy_slow(t: torch.Tensor) -> np.ndarray:
    """Storage without a buffer: a lazy value to materialise, or a CPU tensor."""
    if t.device.type == "cpu":
        if t.dim() == 0:  # CPU scalars may mix with device tensors, as on CUDA
            return t.numpy()
        raise DeviceMismatchError(
            f"expected all tensors on toychip, but got a CPU tensor of shape {tuple(t.shape)}; "
            "move it with .to('toychip') (or the other one with .cpu())")
    storage = t.untyped_storage()
    if hasattr(storage, "_lazy") and _materializer is not None:
        _materializer(storage)
        return as_numpy(t)
    raise RuntimeError(f"toychip tensor on {t.device} has no device buffer")
