"""Device memory: bytes from the chip's C++ allocator, seen by the kernels as NumPy arrays.

A toychip tensor is an ordinary ``torch.Tensor`` on ``toychip:N`` whose storage holds real
memory from the runtime's device allocator (:mod:`toychip.runtime`, ``csrc/ToyChipAllocator``),
so ``data_ptr()``, ``untyped_storage().nbytes()``, DLPack and ``UntypedStorage`` work as on
any device. The kernels are NumPy: they see a storage's bytes through ``storage._buf``, a
flat array over that memory (no copy), made once per storage and kept on it. Views
(``view``, ``t()``, slicing) are new tensors over the *same* storage with other
sizes/strides/offset, so writing through a view writes the base, as on a real device::

    buf = t.untyped_storage()._buf             # flat chip memory, typed like t
    t[i, j] == buf[offset + i*stride0 + j*stride1]

Why the storage and not the tensor: autograd saves C++ shallow copies of tensors, which
drop Python attributes; the storage object is shared by all of them, and PyTorch keeps its
Python object alive exactly as long as the memory. ``_buf`` does not own the memory, so an
array taken from it must not outlive its memory (lazy mode's data nodes keep the storage,
and pending graphs run before a storage's memory is replaced).

A kernel computes its result into a fresh NumPy array, which becomes the new storage's
memory (:func:`wrap`; a real device's kernel writes straight into the memory the allocator
gave it, the toy chip's NumPy kernels allocate their own).

Memory accounting (chapter 06: what saving activations for the backward costs): while a
``toychip.profile()`` is open (:mod:`toychip.ledger` keeps the open ones), every new
storage's bytes are charged to it until the storage dies, giving the profile's
``allocated_bytes``, ``live_bytes`` and ``peak_bytes``. Storages that existed before the
block (parameters, inputs) are not counted; neither are the scratch arrays *inside* one
compiled program -- what a program returns is, unless it is a view of an input -- nor,
for now, the buffers lazy mode materialises.

Every new storage, inside a profile or not, is also booked by the caching allocator
(:mod:`toychip.allocator`: blocks, size classes, ``memory_allocated``/``memory_reserved``),
the chip's simulated bookkeeping of its memory.

Used in chapter 08 (a device allocator) and chapter 04 (a lazy storage has ``_lazy``
instead of ``_buf`` until it is materialised).
"""
from __future__ import annotations

import weakref

import numpy as np
import torch

from . import ledger, races, runtime
from .allocator import for_device
from .dtypes import BUFFER_DTYPE, COMPUTE_DTYPE, TORCH_DTYPE

# The dtypes kernels compute in directly (see toychip.dtypes for float16/bfloat16).
NUMPY_DTYPE = COMPUTE_DTYPE

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
    """Charge a storage's new memory (its ``_raw`` array) to every open profile until it is freed."""
    if id(array) in _counted:
        return
    nbytes, counters = array.nbytes, ledger.open_profiles()
    for c in counters:
        c.allocated_bytes += nbytes
        c.live_bytes += nbytes
        if c.live_bytes > c.peak_bytes:
            c.peak_bytes = c.live_bytes
    _counted.add(id(array))
    weakref.finalize(array, _release, id(array), nbytes, counters).atexit = False


def _release(key: int, nbytes: int, counters: tuple) -> None:
    _counted.discard(key)
    for c in counters:
        c.live_bytes -= nbytes


def attach(storage, np_dtype: np.dtype, *, booked: bool = True, counted: bool = True) -> np.ndarray:
    """Make ``storage``'s memory visible to the kernels: ``storage._raw`` (its bytes) and
    ``storage._buf`` (typed ``np_dtype``). ``booked``: the caching allocator books a block for
    it (``storage._block``, returned to the cache when the storage dies; always, like
    ``torch.cuda.memory_allocated``, except for a copy of memory already on the chip, see
    :func:`wrap`). ``counted``: open profiles count it as new memory."""
    raw = runtime.buffer(storage)
    storage._raw = raw
    storage._buf = raw.view(np_dtype)
    storage._block = for_device(storage.device.index).lease(raw) if booked else None
    races.fresh(storage)
    if counted and ledger.profiling():
        count_buffer(raw)
    return storage._buf


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


def device_of(args) -> int:
    """The chip a kernel's results go to: that of its first chip tensor argument (the rule of
    the device guard that PyTorch's generated C++ wrappers set), else the current chip."""
    index = _first_chip(args)
    return runtime.current_device() if index is None else index


def _first_chip(args) -> int | None:
    for a in args:
        if isinstance(a, torch.Tensor):
            index = a.get_device()
            if index >= 0:
                return index
        elif isinstance(a, (list, tuple)) and a and isinstance(a[0], torch.Tensor):
            index = _first_chip(a)
            if index is not None:
                return index
    return None


def wrap(array, counted: bool = True, device: int | None = None) -> torch.Tensor:
    """A new toychip tensor holding ``array``, on ``device`` (default: the current one).

    A fresh C-contiguous result (it owns its memory) becomes the storage's memory as it is
    (``runtime.adopt``); anything else -- a view of an input, a strided result -- is copied
    into new memory from the allocator. ``counted=False``: ``array`` is a view of memory
    already on the chip (say ``t(weight)`` returned by a compiled graph); the copy is not
    charged as new device memory.
    """
    array = np.asarray(array)
    try:
        dtype = TORCH_DTYPE[array.dtype]
    except KeyError:
        raise TypeError(f"toychip kernel produced unsupported dtype {array.dtype}") from None
    device = runtime.current_device() if device is None else device
    if array.flags.owndata and array.flags.c_contiguous:
        t = runtime.adopt(array, dtype, device)
        attach(t.untyped_storage(), array.dtype, booked=counted, counted=counted)
        return t
    t = runtime.empty_strided(array.shape, contiguous_strides(array.shape), dtype, device)
    np.copyto(attach(t.untyped_storage(), array.dtype, booked=counted, counted=counted).reshape(array.shape), array)
    return t


def storage_nelems(size, stride) -> int:
    """Elements a storage needs to hold a tensor of ``size``/``stride`` at offset 0."""
    if any(s == 0 for s in size):
        return 0
    return 1 + sum((s - 1) * st for s, st in zip(size, stride))


def allocate(size, stride, dtype: torch.dtype, device: int | None = None) -> torch.Tensor:
    """``empty_strided`` on the chip: new memory from the runtime, booked and counted."""
    np_dtype = check_dtype(dtype)
    t = runtime.empty_strided(list(size), list(stride), dtype,
                              runtime.current_device() if device is None else device)
    attach(t.untyped_storage(), np_dtype)
    return t


def contiguous_strides(size) -> list[int]:
    """Row-major strides of ``size`` (the strides ``torch.empty(size)`` would get)."""
    strides, acc = [], 1
    for s in reversed(size):
        strides.append(acc)
        acc *= max(s, 1)
    return strides[::-1]


def format_strides(size, memory_format=None) -> list[int]:
    """The strides ``torch.empty(size, memory_format=...)`` gets on the CPU: row-major, or
    channels innermost for ``channels_last``/``channels_last_3d`` (asked of a meta tensor,
    which also raises CPU's error for a format that does not fit ``size``)."""
    if memory_format is None or memory_format == torch.contiguous_format:
        return contiguous_strides(size)
    return list(torch.empty(size, device="meta", memory_format=memory_format).stride())


def _view_of(t: torch.Tensor, storage, offset: int, size, stride) -> torch.Tensor:
    """Give ``t`` new sizes/strides/offset over ``storage`` through the Meta kernel of
    ``aten.set_`` (no kernel of the chip runs), inside the storage's memory: the Meta kernel
    would grow ``nbytes`` without memory behind it, so the bounds are checked here, as
    CPU's ``checkInBoundsForStorage`` does."""
    elements = storage_nelems(size, stride)
    needed = (offset + elements) * t.element_size()
    if elements and needed > storage.nbytes():
        raise RuntimeError(f"setStorage: sizes {list(size)}, strides {list(stride)}, storage offset {offset}, "
                           f"and itemsize {t.element_size()} requiring a storage size of {needed} are out of "
                           f"bounds for storage of size {storage.nbytes()}")
    _set_storage.redispatch(_META_KEYS, t, storage, offset, size, stride)
    return t


def alias(t: torch.Tensor, size, stride, offset: int) -> torch.Tensor:
    """A view of ``t``'s storage with new metadata; no data moves (``as_strided``). The storage
    object, and so its memory and ``_buf``, is shared."""
    return _view_of(runtime.empty_strided([0], [1], t.dtype, t.get_device()), t.untyped_storage(), offset, size, stride)


def restride(t: torch.Tensor, size, stride, offset: int) -> torch.Tensor:
    """``as_strided_`` on the chip: new metadata for ``t`` itself over the same memory."""
    return _view_of(t, t.untyped_storage(), offset, size, stride)


def set_storage(t: torch.Tensor, storage, offset: int, size, stride) -> torch.Tensor:
    """``t.set_(storage, ...)``: ``t`` views ``storage``, whatever dtype the storage's other
    tensors have (``torch.load`` and ``UntypedStorage.copy_`` view bytes as uint8)."""
    check_dtype(t.dtype)
    buffer_of(storage)
    return _view_of(t, storage, offset, size, stride)


def resize(t: torch.Tensor, size) -> torch.Tensor:
    """``resize_`` on the chip: contiguous ``size``, keeping the data; the memory grows if needed
    (the runtime's ``resizePrivateUse1Bytes``: new memory, the old bytes copied)."""
    size = list(size)
    storage = t.untyped_storage()
    np_dtype = buffer_of(storage).dtype
    needed = (t.storage_offset() + storage_nelems(size, contiguous_strides(size))) * t.element_size()
    if needed > storage.nbytes():
        _before_memory_moves(storage)
        runtime.resize_storage_bytes(storage, needed)
        attach(storage, np_dtype)
    return restride(t, size, contiguous_strides(size), t.storage_offset())


def replace_memory(storage, array: np.ndarray, counted: bool = True, alias: bool = False) -> np.ndarray:
    """``storage``'s memory becomes ``array``'s (a C-contiguous copy of it, unless ``array``
    owns its memory and is one already, or ``alias``: ``array`` is C-contiguous memory that its
    base keeps alive, such as pages other processes map too); pending graphs that
    read the old memory run first, since replacing it frees it. Returns the kernels' new view
    (see :func:`attach`)."""
    _before_memory_moves(storage)
    owned = array if alias or (array.flags.owndata and array.flags.c_contiguous) else np.array(array, order="C")
    runtime.adopt_into(storage, owned)
    return attach(storage, array.dtype, counted=counted)


# Set by :mod:`toychip.lazy`: runs the pending graphs that read ``storage``'s memory before
# that memory is replaced (replacing it frees it; the old design's NumPy buffers outlived it).
_pending_readers = None


def set_pending_readers(fn) -> None:
    """Install the function that runs pending graphs reading a storage (chapter 04)."""
    global _pending_readers
    _pending_readers = fn


def _before_memory_moves(storage) -> None:
    if _pending_readers is not None:
        _pending_readers(storage)


def buffer_of(storage) -> np.ndarray:
    """A chip storage's flat buffer: a pending lazy graph runs first; memory made by PyTorch
    itself (``UntypedStorage(n, device="toychip")``, ``torch.load``) is attached as bytes."""
    try:
        return storage._buf
    except AttributeError:
        pass
    if hasattr(storage, "_lazy") and _materializer is not None:
        _materializer(storage)
        return storage._buf
    return attach(storage, np.dtype(np.uint8))


def as_numpy(t: torch.Tensor) -> np.ndarray:
    """The NumPy view of a toychip tensor: its storage's memory seen with its strides.

    Hot path of every eager kernel, so the common case (contiguous, the storage's own dtype)
    is a few C calls.
    """
    storage = t.untyped_storage()
    try:
        buf = storage._buf
    except AttributeError:
        return _as_numpy_slow(t)
    if buf.dtype is not BUFFER_DTYPE[t.dtype]:  # another dtype's tensor over these bytes
        buf = retyped(storage._raw, BUFFER_DTYPE[t.dtype])
    if t.is_contiguous():
        off = t.storage_offset()
        return buf[off:off + t.numel()].reshape(t.shape)
    offset = t.storage_offset()
    if offset + storage_nelems(t.shape, t.stride()) > buf.size:  # its storage was shrunk under it
        raise RuntimeError(f"toychip: a view of size {tuple(t.shape)}, stride {t.stride()} and offset "
                           f"{offset} reaches past its storage of {buf.size} elements")
    size = buf.itemsize
    return _np_as_strided(buf[offset:], t.shape, [s * size for s in t.stride()])


def retyped(raw: np.ndarray, np_dtype: np.dtype) -> np.ndarray:
    """A storage's bytes as whole elements of ``np_dtype``."""
    return raw[:raw.size - raw.size % np_dtype.itemsize].view(np_dtype)


def _as_numpy_slow(t: torch.Tensor) -> np.ndarray:
    """Storage without a buffer: a CPU tensor, a lazy value to materialise, or memory that
    PyTorch's C++ made (attached here)."""
    if t.device.type == "cpu":
        if t.dim() == 0:  # CPU scalars may mix with device tensors, as on CUDA
            return t.numpy()
        raise DeviceMismatchError(
            f"expected all tensors on toychip, but got a CPU tensor of shape {tuple(t.shape)}; "
            "move it with .to('toychip') (or the other one with .cpu())")
    storage = t.untyped_storage()
    if hasattr(storage, "_lazy") and _materializer is not None:
        _materializer(storage)
    else:
        attach(storage, check_dtype(t.dtype))
    return as_numpy(t)


_resize_storage = torch.UntypedStorage.resize_


def _resize_chip_storage(storage, nbytes):
    """``UntypedStorage.resize_``: the runtime's hook gives a chip storage new memory (the old
    is freed), so the kernels' view of it (``_buf``) is made again over the new bytes."""
    chip = storage.device.type == "toychip"
    if chip:
        _before_memory_moves(storage)
    _resize_storage(storage, nbytes)
    if chip and hasattr(storage, "_raw"):
        attach(storage, storage._buf.dtype)
    return storage


def register() -> None:
    """Keep the kernels' view of a storage right when Python resizes it (idempotent)."""
    torch.UntypedStorage.resize_ = _resize_chip_storage
