"""The op mapping: which ATen op runs which chip kernel, registered for ``PrivateUse1``.

This is the heart of porting a chip (chapter 08) and what the dispatcher calls
(chapter 07). :data:`OP_TABLE` maps an ATen overload to a kernel of
:mod:`toychip.kernels`; ``register()`` installs an eager wrapper for each one with
``torch.library.Library("aten", "IMPL").impl(op, fn, "PrivateUse1")``, plus the memory
ops every device needs (``empty_strided``, ``_copy_from``, views, ``fill_`` ...).
The lazy executor and the compiler call the same entries on NumPy arrays
(:meth:`OpEntry.run`), so all three modes share one kernel library. Which of these kernels
the dispatcher gets is declared in ``native_functions.yaml`` (see :mod:`toychip.registration`).

``torch._C._dispatch_dump("aten::relu")`` then shows a ``PrivateUse1`` kernel
registered from this file.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch
from torch.nn.attention import SDPBackend

from . import device, ledger, races, registration
from .dtypes import HALF_DTYPES, TORCH_DTYPE, host_array, host_tensor, is_half_buffer, narrow, store, \
    values_of, widen
from .kernels import KERNELS, Kernel
from .memory import NUMPY_DTYPE, DeviceMismatchError, alias, allocate, as_numpy, check_dtype, \
    contiguous_strides, device_of, format_strides, resize, restride, set_storage, wrap
from .spec import check_index

aten = torch.ops.aten
Tensor = torch.Tensor

# How many times each ATen op ran on a chip kernel (read by toychip.coverage()).
NATIVE_COUNTS: Counter = Counter()


@dataclass(frozen=True)
class OpEntry:
    """One row of the op table: an ATen op served by a chip kernel.

    ``adapt(*args, **kwargs) -> (args, kwargs)`` reorders ATen's arguments into the
    kernel's when they differ (``None``: same order); ``inplace`` marks ``add_``-style
    variants that write their result into argument 0.

    Some ATen ops write arguments that the kernel, being functional, returns instead:
    ``native_batch_norm`` updates the running statistics in place, the ``batch_norm``
    kernel returns them as outputs 3 and 4. ``writes`` pairs such outputs with the
    arguments they replace (``((3, 3), (4, 4))``): eager mode copies them in; lazy mode
    records the ``functional`` op instead (``_native_batch_norm_legit_functional``) and
    re-points the arguments at its outputs -- the same functionalisation AOTAutograd does.
    """

    op: torch._ops.OpOverload
    kernel: Kernel
    adapt: Callable | None = None
    inplace: bool = False
    writes: tuple = ()
    functional: torch._ops.OpOverload | None = None

    def run(self, *args, **kwargs):
        """Run the kernel on NumPy arguments (the lazy executor and compiled code call this)."""
        if self.adapt is not None:
            out = kwargs.pop("out", None)
            args, kwargs = self.adapt(*args, **kwargs)
            if out is not None:
                kwargs["out"] = out
        half = next((a.dtype for a in args if is_half_buffer(a)), None)
        if half is not None:
            return self._run_widened(TORCH_DTYPE[half], args, kwargs)
        return self.kernel.fn(*args, **kwargs)

    def _run_widened(self, half: torch.dtype, args, kwargs):
        """16-bit float buffers: compute on float32 copies, round float results back."""
        out = kwargs.pop("out", None)
        args = [widen(a) if is_half_buffer(a) else a for a in args]
        result = self.kernel.fn(*args, **kwargs)
        results = tuple(narrow(r, half) if r.dtype.kind == "f" else r
                        for r in (result if isinstance(result, tuple) else (result,)))
        if out is not None:
            store(out, values_of(results[0]), TORCH_DTYPE[out.dtype])
            results = (out,) + results[1:]
        return results if isinstance(result, tuple) else results[0]


class KernelDeclined(NotImplementedError):
    """An adapter refuses these arguments (e.g. a grouped conv); eager mode falls back."""


# Set by toychip.fallback: runs a declined op on the CPU, ``(op, *args, **kwargs)``.
_decline_handler = None


def set_decline_handler(fn) -> None:
    global _decline_handler
    _decline_handler = fn


def _drop_memory_format(a, memory_format=None):
    return (a,), {}


def _convolution(x, w, b, stride, padding, dilation, transposed, output_padding, groups):
    if transposed or groups != 1 or x.ndim != 4:
        raise KernelDeclined("toychip conv2d kernel supports 2-D, groups=1, not transposed")
    return (x, w, b, stride, padding, dilation), {}


def _convolution_backward(g, x, w, bias_sizes, stride, padding, dilation, transposed,
                          output_padding, groups, output_mask):
    _convolution(x, w, None, stride, padding, dilation, transposed, output_padding, groups)
    return (g, x, w, stride, padding, dilation), {}


def _batch_norm_no_training(x, w, b, running_mean, running_var, momentum, eps):
    return (x, w, b, running_mean, running_var, False, momentum, eps), {}


def conv_supported(node_args) -> bool:
    """Whether a ``convolution`` call (FX args) fits the chip's conv2d kernel."""
    x = node_args[0]
    transposed, groups = node_args[6], node_args[8]
    return not transposed and groups == 1 and x.meta["val"].dim() == 4


# ATen overload -> (kernel name, adapter). Every pointwise op also gets its in-place
# variant (``add_.Tensor``) registered automatically when ATen has one.
_COMPUTE_OPS = {
    "add.Tensor": "add", "add.Scalar": "add", "sub.Tensor": "sub", "sub.Scalar": "sub",
    "rsub.Tensor": "rsub", "rsub.Scalar": "rsub", "mul.Tensor": "mul", "mul.Scalar": "mul",
    "div.Tensor": "div", "div.Scalar": "div", "div.Tensor_mode": "div", "neg.default": "neg",
    "exp.default": "exp", "log.default": "log", "sqrt.default": "sqrt", "rsqrt.default": "rsqrt",
    "reciprocal.default": "reciprocal", "abs.default": "abs", "pow.Tensor_Scalar": "pow",
    "pow.Scalar": "pow", "pow.Tensor_Tensor": "pow", "tanh.default": "tanh", "erf.default": "erf",
    "sigmoid.default": "sigmoid", "silu.default": "silu", "relu.default": "relu", "maximum.default": "maximum",
    "minimum.default": "minimum", "clamp.default": "clamp", "where.self": "where",
    "eq.Tensor": "eq", "eq.Scalar": "eq", "ne.Tensor": "ne", "ne.Scalar": "ne",
    "lt.Tensor": "lt", "lt.Scalar": "lt", "le.Tensor": "le", "le.Scalar": "le",
    "gt.Tensor": "gt", "gt.Scalar": "gt", "ge.Tensor": "ge", "ge.Scalar": "ge",
    "logical_not.default": "logical_not", "threshold_backward.default": "threshold_backward",
    "sigmoid_backward.default": "sigmoid_backward", "tanh_backward.default": "tanh_backward",
    "lerp.Scalar": "lerp", "lerp.Tensor": "lerp", "addcmul.default": "addcmul",
    "addcdiv.default": "addcdiv",
    "clone.default": ("clone", _drop_memory_format),
    "mm.default": "mm", "bmm.default": "bmm", "addmm.default": "addmm",
    "sum.default": "sum", "sum.dim_IntList": "sum", "mean.default": "mean", "mean.dim": "mean",
    "amax.default": "amax", "argmax.default": "argmax",
    "_log_softmax.default": "log_softmax", "_softmax.default": "softmax",
    "_log_softmax_backward_data.default": "log_softmax_backward",
    "_softmax_backward_data.default": "softmax_backward",
    "nll_loss_forward.default": "nll_loss", "nll_loss_backward.default": "nll_loss_backward",
    "mse_loss.default": "mse_loss", "mse_loss_backward.default": "mse_loss_backward",
    "convolution.default": ("conv2d", _convolution),
    "convolution_backward.default": ("conv2d_backward", _convolution_backward),
    "_native_batch_norm_legit_functional.default": "batch_norm",
    "_native_batch_norm_legit_no_training.default": ("batch_norm", _batch_norm_no_training),
    "native_batch_norm_backward.default": "batch_norm_backward",
    "native_layer_norm.default": "layer_norm", "native_layer_norm_backward.default": "layer_norm_backward",
    "max_pool2d_with_indices.default": "max_pool2d",
    "max_pool2d_with_indices_backward.default": "max_pool2d_backward",
    "select_scatter.default": "select_scatter", "slice_scatter.default": "slice_scatter",
    "diagonal_scatter.default": "diagonal_scatter",
    "_thnn_fused_lstm_cell.default": "lstm_cell",
    "_thnn_fused_lstm_cell_backward_impl.default": "lstm_cell_backward",
    "_thnn_fused_gru_cell.default": "gru_cell",
    "_thnn_fused_gru_cell_backward.default": "gru_cell_backward",
    "_scaled_dot_product_fused_attention_overrideable.default": "attention",
    "_scaled_dot_product_fused_attention_overrideable_backward.default": "attention_backward",
}

# Ops that write arguments the kernel returns: ATen op -> (kernel, (output, argument) pairs,
# the functional op lazy mode records instead); see OpEntry.
_WRITING_OPS = {
    "native_batch_norm.default": ("batch_norm", ((3, 3), (4, 4)), "_native_batch_norm_legit_functional.default"),
    "_native_batch_norm_legit.default": ("batch_norm", ((3, 3), (4, 4)),
                                         "_native_batch_norm_legit_functional.default"),
}


def _overload(qualified: str) -> torch._ops.OpOverload:
    name, overload = qualified.split(".")
    return getattr(getattr(aten, name), overload)


def _np_dtype(dtype, default=None) -> np.dtype:
    """Arguments reach kernels with NumPy dtypes already (see ``_arg``); ``None`` -> default."""
    if dtype is not None:
        return np.dtype(dtype)
    return default if default is not None else NUMPY_DTYPE[torch.get_default_dtype()]


def _factory(*args, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
    """Factories: drop the placement kwargs, keep the dtype."""
    return args, {"dtype": _np_dtype(dtype)}


def _full_like(a, fill_value, dtype=None, layout=None, device=None, pin_memory=None,
               memory_format=None):
    return (a.shape, fill_value), {"dtype": _np_dtype(dtype, a.dtype)}


def _scalar_tensor(s, dtype=None, layout=None, device=None, pin_memory=None):
    return ((), s), {"dtype": _np_dtype(dtype)}


def _empty_permuted(size, physical_layout, dtype=None, layout=None, device=None, pin_memory=None):
    return (size,), {"dtype": _np_dtype(dtype)}


def _to_copy(a, dtype=None, layout=None, device=None, pin_memory=None, non_blocking=False,
             memory_format=None):
    return (a, _np_dtype(dtype, a.dtype)), {}


def _t(a):
    return (a,), {"dim0": 0, "dim1": a.ndim - 1}


# Ops that only appear in graphs (compiled or lazy): views and factories on NumPy arrays.
_GRAPH_OPS = {
    "view.default": "reshape", "_unsafe_view.default": "reshape", "reshape.default": "reshape",
    "permute.default": "permute", "transpose.int": "transpose", "t.default": ("transpose", _t),
    "expand.default": "expand", "unsqueeze.default": "unsqueeze", "squeeze.dims": "squeeze",
    "squeeze.dim": "squeeze", "squeeze.default": "squeeze", "slice.Tensor": "slice",
    "select.int": "select", "alias.default": "alias", "detach.default": "alias",
    "as_strided.default": "as_strided",
    "full.default": ("full", _factory), "full_like.default": ("full", _full_like),
    "scalar_tensor.default": ("full", _scalar_tensor),
    "empty.memory_format": ("empty", _factory), "empty_permuted.default": ("empty", _empty_permuted),
    "_to_copy.default": ("cast", _to_copy), "lift_fresh_copy.default": "clone",
    "gather.default": "gather", "scatter.value": "scatter", "copy.default": "copy",
    "copy_.default": "copy_",
}


def _build_table(spec: dict, with_inplace: bool) -> dict:
    table = {}
    for qualified, target in spec.items():
        kernel_name, adapt = target if isinstance(target, tuple) else (target, None)
        kern = KERNELS[kernel_name]
        op = _overload(qualified)
        table[op] = OpEntry(op, kern, adapt)
        name, overload = qualified.split(".")
        packet = getattr(aten, name + "_", None)
        if with_inplace and kern.kind == "pointwise" and packet is not None \
                and overload in packet.overloads():
            inplace = getattr(packet, overload)
            table[inplace] = OpEntry(inplace, kern, adapt, inplace=True)
    return table


def _writing_entries() -> dict:
    return {_overload(q): OpEntry(_overload(q), KERNELS[k], writes=writes, functional=_overload(functional))
            for q, (k, writes, functional) in _WRITING_OPS.items()}


# Registered for PrivateUse1 (eager) and used by graphs.
OP_TABLE: dict[torch._ops.OpOverload, OpEntry] = {**_build_table(_COMPUTE_OPS, with_inplace=True),
                                                  **_writing_entries()}
# Everything a compiled or lazy graph may run on the chip.
GRAPH_TABLE: dict[torch._ops.OpOverload, OpEntry] = {
    **OP_TABLE, **_build_table(_GRAPH_OPS, with_inplace=False)}


# ``_foreach_add_.List`` -> ``add_.Tensor``: the per-tensor overload of each foreach overload.
_FOREACH_ELEMENT = {"List": "Tensor", "Scalar": "Scalar", "ScalarList": "Scalar",
                    "Tensor": "Tensor", "ScalarAndTensor": "Scalar", "default": "default"}


def foreach_element_op(func):
    """The per-tensor op of a ``_foreach_*`` op, or ``None``."""
    name = func.__name__.split(".")[0]
    if not name.startswith("_foreach_"):
        return None
    packet = getattr(aten, name.removeprefix("_foreach_"), None)
    if packet is None:
        return None
    for overload in (_FOREACH_ELEMENT.get(func._overloadname), "default"):
        if overload in packet.overloads():
            return getattr(packet, overload)
    return None


def foreach_calls(func, element, args, kwargs):
    """The per-tensor (args, kwargs) of a foreach call, mapped onto ``element``'s schema.

    A foreach op is a loop over a table op: ``for i: element(self[i], other[i], ...)``.
    Lists may hold tensors or FX nodes alike (the compiler expands graphs with this too).
    """
    outer, inner = func._schema.arguments, element._schema.arguments
    count = next(len(a) for a, o in zip(args, outer) if isinstance(o.type, torch.ListType))
    for i in range(count):
        pos, kw = [], dict(kwargs)
        for value, outer_arg, inner_arg in zip(args, outer, inner):
            if isinstance(outer_arg.type, torch.ListType):
                value = value[i]
            if inner_arg.kwarg_only:
                kw[inner_arg.name] = value
            else:
                pos.append(value)
        yield tuple(pos), kw


# --------------------------------------------------------------------------- eager wrappers
def _arg(a):
    """Tensor -> its NumPy view (16-bit floats: widened to float32); lists of tensors
    likewise; a dtype -> the NumPy dtype kernels compute in; anything else unchanged."""
    if isinstance(a, Tensor):
        return as_numpy(a) if a.dtype not in HALF_DTYPES else widen(as_numpy(a))
    if isinstance(a, (list, tuple)) and a and isinstance(a[0], Tensor):
        return [_arg(x) for x in a]
    if isinstance(a, torch.dtype):
        return NUMPY_DTYPE[a] if a not in HALF_DTYPES else NUMPY_DTYPE[torch.float32]
    return a


def _half_dtype(args) -> torch.dtype | None:
    """The 16-bit float dtype among a call's tensor arguments, if any."""
    for a in args:
        if isinstance(a, Tensor) and a.dtype in HALF_DTYPES:
            return a.dtype
    return None


def _result_dtype(result: np.ndarray, entry: OpEntry, args, half: torch.dtype) -> torch.dtype:
    """The dtype PyTorch gives a result computed in float32 from 16-bit inputs."""
    if result.dtype.kind != "f":
        return TORCH_DTYPE[result.dtype]
    return _pointwise_dtype(args) if entry.kernel.kind == "pointwise" else half


def _run_half(entry: OpEntry, name: str, args, arrays, kw, half: torch.dtype, stream):
    """A kernel on 16-bit floats: it ran on float32 copies; round the results back (``stream``:
    the race report's, see :func:`eager_kernel`).

    Real chips do the same (compute in float32, store in 16 bits); rounding each op's
    result is also what PyTorch's CPU kernels do, so the bits match. ``half`` is the dtype
    of its non-pointwise float results: the 16-bit input's, or the one ``dtype=`` asked for.
    """
    result = entry.kernel.fn(*arrays, **kw)
    computed = tuple(np.asarray(r) if isinstance(r, np.generic) else r  # a 0-d result is a NumPy scalar
                     for r in (result if isinstance(result, tuple) else (result,)))
    stored = tuple(narrow(r, _result_dtype(r, entry, args, half)) if isinstance(r, np.ndarray) else r
                   for r in computed)
    if ledger.charging():
        inputs = [as_numpy(a) for a in args if isinstance(a, Tensor)]
        ledger.charge_kernel(name, ledger.array_bytes(inputs) + ledger.array_bytes(stored),
                            entry.kernel.flops(arrays, computed))
    if entry.inplace:
        store(as_numpy(args[0]), computed[0], args[0].dtype)
        return args[0]
    if entry.writes:
        _write_arguments(entry, args, computed)
    device = device_of(args)
    wrapped = tuple(_wrap_result(r, device) for r in stored[:len(entry.op._schema.returns)])
    if stream is not None:
        races.produced(name, wrapped)  # a race on the results names this kernel as their writer
    return wrapped if isinstance(result, tuple) else wrapped[0]


def _wrap_result(r, device: int):
    """One output of a multi-output kernel: an array (or NumPy scalar: a 0-d result) becomes a
    chip tensor; ``None`` (an output not computed) and Python numbers (attention's max_q) stay."""
    return wrap(r, device=device) if isinstance(r, (np.ndarray, np.generic)) else r


def _write_arguments(entry: OpEntry, args, results: tuple) -> None:
    """Copy the outputs that ``entry.writes`` names into their arguments (e.g. running stats)."""
    for output, argument in entry.writes:
        target = args[argument] if argument < len(args) else None
        if isinstance(target, Tensor) and results[output] is not None:
            store(as_numpy(target), results[output], target.dtype)


def _pointwise_dtype(args) -> torch.dtype:
    """PyTorch's result dtype for a pointwise op on these arguments (type promotion)."""
    tensors = [a for a in args[:2] if isinstance(a, (Tensor, int, float, bool))]
    return torch.result_type(*tensors) if len(tensors) == 2 else args[0].dtype


def _promoted(result: np.ndarray, args) -> np.ndarray:
    """Cast a pointwise result to PyTorch's result dtype where NumPy's promotion differs."""
    dtype = _pointwise_dtype(args)
    if not dtype.is_floating_point and result.dtype.kind == "f":
        dtype = torch.get_default_dtype()
    return result.astype(NUMPY_DTYPE[dtype], copy=False)


def eager_kernel(entry: OpEntry) -> Callable:
    """The PrivateUse1 kernel for one table row: unwrap, run, charge, wrap.

    Kept flat on purpose: this closure runs for every eager op (the <= 15 us budget).
    """
    name = str(entry.op).removeprefix("aten.")
    fn, flops, kind, adapt, inplace, writes = entry.kernel.fn, entry.kernel.flops, entry.kernel.kind, \
        entry.adapt, entry.inplace, entry.writes
    written = (0,) if inplace else tuple(argument for _, argument in writes)  # arguments the op writes
    promotes = kind == "pointwise"  # pointwise results follow PyTorch's type promotion
    returns = len(entry.op._schema.returns)  # a kernel may return more (see OpEntry.writes)

    def run(*args, **kwargs):
        try:
            arrays = [_arg(a) for a in args]
            kw = {k: _arg(v) for k, v in kwargs.items()} if kwargs else kwargs
            half = _half_dtype(args)
        except DeviceMismatchError as e:
            raise DeviceMismatchError(f"aten.{name}: {e}") from None
        if adapt is not None:
            try:
                arrays, kw = adapt(*arrays, **kw)
            except KernelDeclined:
                return _decline_handler(entry.op, *args, **kwargs)
        stream = races.stream_of_work()
        if stream is not None:
            races.op(name, stream, args, [args[i] for i in written if i < len(args)])
        NATIVE_COUNTS[name] += 1
        requested = kwargs.get("dtype")  # a reduction's dtype= names its result's dtype
        if half is not None or requested in HALF_DTYPES:
            return _run_half(entry, name, args, arrays, kw, requested or half, stream)
        if inplace:
            result = fn(*arrays, out=arrays[0], **kw)
        else:
            result = fn(*arrays, **kw)
        if ledger.charging():
            outs = result if isinstance(result, tuple) else (result,)
            ledger.charge_kernel(name, ledger.array_bytes(arrays) + ledger.array_bytes(outs), flops(arrays, outs))
        if inplace:
            return args[0]
        if isinstance(result, tuple):
            if writes:
                _write_arguments(entry, args, result)
            device = device_of(args)
            outputs = tuple(_wrap_result(r, device) for r in result[:returns])
        else:
            first = arrays[0]  # a Python scalar for pow.Scalar
            if promotes and result.dtype.kind != "b" and (not isinstance(first, np.ndarray) or result.dtype != first.dtype):
                result = _promoted(result, args)
            outputs = wrap(result, device=device_of(args))
        if stream is not None:
            races.produced(name, outputs)  # a race on the results names this kernel as their writer
        return outputs

    return run


# --------------------------------------------------------------------------- memory ops
def _empty_memory_format(size, dtype=None, layout=None, device=None, pin_memory=None,
                         memory_format=None):
    return _empty_strided(size, format_strides(size, memory_format), dtype, device=device)


def _empty_strided(size, stride, dtype=None, layout=None, device=None, pin_memory=None):
    check_index(device)
    return allocate(size, stride, dtype or torch.get_default_dtype(), None if device is None else device.index)


def _watched(name: str, reads=(), writes=()):
    """The race report's view of a memory op (see :mod:`toychip.races`); the stream it runs on, if watched."""
    stream = races.stream_of_work()
    if stream is not None:
        races.op(name, stream, reads, writes)
    return stream


def _copy_from(src: Tensor, dst: Tensor, non_blocking: bool = False) -> Tensor:
    """Every ``.to()``/``.cpu()``/``copy_`` touching the chip lands here: H2D, D2H or D2D.

    On the simulated clock a host<->chip copy is *blocking* -- the host waits for it, and so
    does all work issued after it -- unless it is ``non_blocking`` and its host tensor is
    pinned: CUDA's ``copy_`` then calls ``cudaMemcpyAsync`` alone; with ``non_blocking=False``
    it synchronises the stream (``memcpy_and_sync``), and a pageable source is staged by the
    driver, which takes the host's time. For the race report only ``non_blocking=False`` is a
    host wait: ``cudaMemcpyAsync`` from pageable memory may return before the data has arrived.
    """
    stream = _watched("_copy_from.default", reads=(src,), writes=(dst,))
    if dst.device.type == "cpu":
        data = as_numpy(src)
        dst.copy_(host_tensor(np.asarray(data, order="C")))
        _charge_host_copy("to_cpu", data.nbytes, non_blocking, non_blocking and dst.is_pinned(), stream)
        return dst
    target = as_numpy(dst)
    if src.device.type == "cpu":
        check_dtype(src.dtype)
        data = host_array(src)
        _charge_host_copy("to_chip", data.nbytes, non_blocking, non_blocking and src.is_pinned(), stream)
    else:
        data = as_numpy(src)
        if ledger.charging():
            ledger.charge_kernel("copy_", data.nbytes + target.nbytes, 0)
    store(target, data, dst.dtype)
    NATIVE_COUNTS["_copy_from"] += 1
    return dst


def _charge_host_copy(direction: str, nbytes: int, non_blocking: bool, from_pinned: bool, stream) -> None:
    """A host<->chip copy: on the clock the host waits for its stream unless it is ``non_blocking``
    ``from_pinned`` memory; for the race report (``stream``: watched) unless it is ``non_blocking``."""
    if ledger.charging():
        ledger.charge_copy(direction, nbytes, blocking=not from_pinned)
    if not non_blocking:
        races.host_waits(stream or ledger.current_stream())


def _record_stream(t, s) -> None:
    """``Tensor.record_stream(s)``: the caching allocator keeps ``t``'s block from being handed
    out again until the work queued on ``s`` before ``t`` is freed is done (:mod:`toychip.allocator`)."""
    lease = getattr(t.untyped_storage(), "_block", None)
    if lease is not None:
        lease.allocator.record_stream(lease, s.stream_id)


def _as_strided(t, size, stride, storage_offset=None):
    return alias(t, size, stride, t.storage_offset() if storage_offset is None else storage_offset)


def _as_strided_inplace(t, size, stride, storage_offset=None):
    return restride(t, size, stride, t.storage_offset() if storage_offset is None else storage_offset)


def _set_source_storage(t, source, storage_offset=0, size=(), stride=()):
    return set_storage(t, source, storage_offset, size, stride)


def _set_whole_storage(t, source):
    """``t.set_(storage)``: ``t`` becomes 1-d over all of it (``UntypedStorage.copy_`` uses this)."""
    numel = source.nbytes() // t.element_size()
    return set_storage(t, source, 0, [numel], [1])


def _resize(t, size, memory_format=None):
    return resize(t, size)


def _view(t, size):
    if t.is_contiguous():
        size = _infer_size(size, t.numel())
        return alias(t, size, contiguous_strides(size), t.storage_offset())
    meta = torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device="meta").view(size)
    return alias(t, meta.shape, meta.stride(), t.storage_offset())


def _infer_size(size, numel: int) -> list[int]:
    size = list(size)
    if -1 in size:
        known = int(np.prod([s for s in size if s != -1]))
        size[size.index(-1)] = numel // known if known else 0
    if int(np.prod(size)) != numel:
        raise RuntimeError(f"shape '{size}' is invalid for input of size {numel}")
    return size


def _reshape_alias(t, size, stride):
    return alias(t, size, stride, t.storage_offset())


def _local_scalar_dense(t):
    """``.item()``: a blocking copy of one element to the host."""
    stream = _watched("_local_scalar_dense.default", reads=(t,))
    value = values_of(as_numpy(t)).item()
    _charge_host_copy("to_cpu", t.element_size(), False, False, stream)
    return value


def _fill(t, value, name: str | None = None):
    _watched(name or ("fill_.Tensor" if isinstance(value, Tensor) else "fill_.Scalar"), reads=(value,), writes=(t,))
    target = as_numpy(t)
    store(target, as_numpy(value) if isinstance(value, Tensor) else value, t.dtype)
    if ledger.charging():
        ledger.charge_kernel("fill_", target.nbytes, 0)
    return t


def _zero(t):
    return _fill(t, 0, "zero_.default")


def _normal(t, mean=0.0, std=1.0, *, generator=None):
    _watched("normal_.default", writes=(t,))
    target = as_numpy(t)
    store(target, device.rng(generator, t.device).normal(mean, std, target.shape), t.dtype)
    if ledger.charging():
        ledger.charge_kernel("normal_", target.nbytes, target.size)
    return t


def _uniform(t, low=0.0, high=1.0, *, generator=None):
    _watched("uniform_.default", writes=(t,))
    target = as_numpy(t)
    store(target, device.rng(generator, t.device).uniform(low, high, target.shape), t.dtype)
    if ledger.charging():
        ledger.charge_kernel("uniform_", target.nbytes, target.size)
    return t


def _clone(t, memory_format=None):
    """``clone`` (``contiguous(memory_format=...)`` too) into memory laid out as the CPU lays
    it out: ``preserve_format`` keeps a dense input's strides, ``channels_last`` is NHWC."""
    out = torch.empty_like(t, memory_format=torch.preserve_format if memory_format is None else memory_format)
    _watched("clone.default", reads=(t,), writes=(out,))
    source, target = as_numpy(t), as_numpy(out)
    clone_kernel = KERNELS["clone"]
    clone_kernel.fn(source, out=target)
    if ledger.charging():
        ledger.charge_kernel("clone.default", source.nbytes + target.nbytes, clone_kernel.flops([source], [target]))
    NATIVE_COUNTS["clone.default"] += 1
    return out


def _fused_sdp_choice(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, *, scale=None,
                      enable_gqa=False) -> int:
    """Which backend ``scaled_dot_product_attention`` should use on the chip: its attention
    kernel (``SDPBackend.OVERRIDEABLE``, the slot PyTorch leaves to PrivateUse1) unless the
    kernel cannot run these arguments (dropout, grouped-query heads) or ``sdpa_kernel()`` has
    turned it off; then PyTorch's math path (built from the chip's matmul and softmax).

    The dispatcher calls this for ``torch._fused_sdp_choice``; ``F.scaled_dot_product_attention``
    itself asks a C++ DispatchStub, which only C++ (``REGISTER_PRIVATEUSE1_DISPATCH``) can fill.
    """
    gqa = enable_gqa and query.size(-3) != key.size(-3)
    if dropout_p == 0.0 and not gqa and torch._C._get_overrideable_sdp_enabled():
        return SDPBackend.OVERRIDEABLE.value
    return SDPBackend.MATH.value if torch._C._get_math_sdp_enabled() else SDPBackend.ERROR.value


def _counted(name: str, fn: Callable) -> Callable:
    def run(*args, **kwargs):
        NATIVE_COUNTS[name] += 1
        return fn(*args, **kwargs)
    run.__name__ = name
    return run


# Device-memory and metadata ops every backend provides (not kernels of the library).
MEMORY_OPS = {
    "empty.memory_format": _empty_memory_format, "empty_strided": _empty_strided,
    "as_strided": _as_strided, "as_strided_": _as_strided_inplace, "resize_": _resize, "view": _view,
    "set_.source_Storage_storage_offset": _set_source_storage, "set_.source_Storage": _set_whole_storage,
    "_reshape_alias": _reshape_alias,
    "_local_scalar_dense": _local_scalar_dense, "fill_.Scalar": _fill, "fill_.Tensor": _fill,
    "zero_": _zero, "normal_": _normal, "uniform_": _uniform, "record_stream": _record_stream,
}

# out= variants served by their functional kernel. Inductor calls matmuls this way
# (``extern_kernels.mm(a, b, out=buf)``, into a buffer its wrapper allocated).
OUT_VARIANTS = {"mm.out": "mm.default", "bmm.out": "bmm.default", "addmm.out": "addmm.default"}


def out_variant(functional: Callable, name: str = "out") -> Callable:
    """``op.out(..., out=t)``: the functional kernel's one launch, its result written into
    ``t`` (resized to fit, as ATen's out= ops do), ``t`` returned; ``name`` (``mm.out``) is
    what the race report calls it."""
    def run(*args, out, **kwargs):
        result = functional(*args, **kwargs)
        _watched(name, writes=(out,))
        if out.shape != result.shape:
            resize(out, result.shape)
        np.copyto(as_numpy(out), as_numpy(result))
        return out

    return run


def eager_kernels() -> dict[str, Callable]:
    """The kernel library as the registration sees it: YAML op name -> PrivateUse1 kernel."""
    kernels = {"_copy_from": _copy_from, "_fused_sdp_choice": _fused_sdp_choice}
    for name, fn in MEMORY_OPS.items():
        kernels[name] = fn if name.startswith("empty") else _counted(name, fn)
    for op, entry in OP_TABLE.items():
        kernels[registration.op_name(op)] = eager_kernel(entry)
    for name, functional in OUT_VARIANTS.items():
        kernels[name] = out_variant(kernels[registration.op_name(_overload(functional))], name)
    kernels["clone"] = _clone  # the table's clone kernel, into a result laid out as the CPU's
    return kernels


_LIB = None


def register() -> None:
    """Register the ops native_functions.yaml declares, with their kernels (idempotent).

    :mod:`toychip.registration` checks the YAML against :func:`eager_kernels` first.
    """
    global _LIB
    if _LIB is not None:
        return
    _LIB = torch.library.Library("aten", "IMPL")
    registration.register(_LIB, eager_kernels())


def ops_table() -> str:
    """A learner-facing listing: ATen op -> chip kernel (kind), one line each (chapter 08)."""
    lines = [f"{'ATen op':<40} {'chip kernel':<22} kind"]
    for op, entry in sorted(OP_TABLE.items(), key=lambda kv: str(kv[0])):
        lines.append(f"{str(op):<40} {entry.kernel.name:<22} {entry.kernel.kind}")
    for name in MEMORY_OPS:
        lines.append(f"{'aten.' + name:<40} {'(memory op)':<22} memory")
    return "\n".join(lines)
