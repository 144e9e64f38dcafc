"""Inductor's fused loops as NumPy: the chip's code generator for ``torch.compile(model)``.

Inductor lowers a graph to loop nests over flat buffers and its scheduler fuses them; each
device then supplies a *kernel* class that prints one fused group in its language: CUDA's
``TritonKernel`` (``torch/_inductor/codegen/triton.py``) derives from ``SIMDKernel``, the
CPU's ``CppKernel`` from ``Kernel``. The chip's :class:`NumpyKernel` derives from
``SIMDKernel`` too and prints NumPy where Triton prints ``tl.``: one *block* covers the
whole iteration space, so there are no program ids, masks or loops, only index arrays::

    xindex = np.arange(xnumel)[:, None]      # the pointwise range, one row each
    r0_index = np.arange(r0_numel)[None, :]  # the reduction range, one column each
    tmp0 = in_ptr0[x0 + 64*r0_1]              # a load: NumPy fancy indexing
    tmp1 = np.sum(np.broadcast_to(tmp0, (xnumel, r0_numel)), axis=-1, keepdims=True)
    out_ptr0[x0] = tmp1                       # a store

* :class:`NumpyOverrides` -- one pointwise op (``ops.exp``, ``ops.where``, ...) as a NumPy
  expression; ops NumPy lacks call the chip's kernel library (``sdk.erf``).
* :class:`NumpyKernel` -- loads, stores, reductions and the kernel's source; it counts the
  bytes its buffers move and the FLOPs its body does, which price its launch (:mod:`toychip.loops`).
* :class:`NumpyScheduling` -- Inductor's SIMD scheduler with this kernel, one tile per kernel.

Matmuls never reach here: Inductor calls them as extern kernels (``extern_kernels.mm``),
which the dispatcher sends to the chip's own ``mm`` kernel. Registered in :mod:`toychip.inductor`.
"""
from __future__ import annotations

import math
import re
from typing import Callable

import sympy
import torch
from torch._inductor.codegen.common import BackendFeature, CSEVariable, DeferredLine, IndentedBuffer, OpOverrides
from torch._inductor.codegen.simd import IterationRangesEntry, IterationRangesRoot, SIMDKernel, SIMDScheduling
from torch._inductor.ops_handler import OpsHandler
from torch._inductor.utils import aggregate_origins, get_fused_kernel_name, get_kernel_metadata
from torch._inductor.virtualized import V
from torch.utils._ordered_set import OrderedSet
from torch.utils._sympy.printers import PythonPrinter

from .dtypes import HALF_DTYPES
from .spec import get_spec

# torch dtype -> the NumPy type generated code computes in (16-bit floats compute in float32).
NP_TYPE = {
    torch.float32: "np.float32", torch.float64: "np.float64", torch.float16: "np.float32",
    torch.bfloat16: "np.float32", torch.int64: "np.int64", torch.int32: "np.int32",
    torch.int16: "np.int16", torch.int8: "np.int8", torch.uint8: "np.uint8", torch.bool: "np.bool_",
}


def np_type(dtype: torch.dtype) -> str:
    if dtype not in NP_TYPE:
        raise NotImplementedError(f"toychip: Inductor kernels do not compute in {dtype}")
    return NP_TYPE[dtype]


class NumpyPrinter(PythonPrinter):
    """Index expressions over arrays: Python's ``min``/``max``/``math.floor`` are scalar-only."""

    def _print_Min(self, expr: sympy.Expr) -> str:
        return self._fold("np.minimum", expr.args)

    def _print_Max(self, expr: sympy.Expr) -> str:
        return self._fold("np.maximum", expr.args)

    def _fold(self, fn: str, args) -> str:
        text = self._print(args[0])
        for arg in args[1:]:
            text = f"{fn}({text}, {self._print(arg)})"
        return text

    def _print_Where(self, expr: sympy.Expr) -> str:
        return f"np.where({', '.join(map(self._print, expr.args))})"

    def _print_floor(self, expr: sympy.Expr) -> str:
        return f"np.floor({self._print(expr.args[0])})"

    def _print_ceiling(self, expr: sympy.Expr) -> str:
        return f"np.ceil({self._print(expr.args[0])})"

    def _print_FloorToInt(self, expr: sympy.Expr) -> str:
        return f"np.floor({self._print(expr.args[0])}).astype(np.int64)"

    def _print_CeilToInt(self, expr: sympy.Expr) -> str:
        return f"np.ceil({self._print(expr.args[0])}).astype(np.int64)"

    def _print_Abs(self, expr: sympy.Expr) -> str:
        return f"np.abs({self._print(expr.args[0])})"


numpy_expr = NumpyPrinter().doprint


def literal(value) -> str:
    """``value`` (a Python number) as source text; infinities and NaN too."""
    if isinstance(value, float) and not math.isfinite(value):
        return "np.nan" if math.isnan(value) else ("np.inf" if value > 0 else "-np.inf")
    return repr(value)


def constant_text(value, dtype: torch.dtype) -> str:
    """``value`` as a constant of ``dtype``: a NumPy float scalar keeps its float type, an
    integer or bool stays a Python literal, which takes the type of the array it meets
    (NumPy 2's rules), as Inductor's typed ops expect (``maximum(x, 0)`` stays float32)."""
    if dtype == torch.bool:
        return repr(bool(value))
    if dtype.is_floating_point:
        return f"{np_type(dtype)}({literal(float(value))})"
    return literal(int(value))


class NumpyOverrides(OpOverrides):
    """Pointwise ops as NumPy expressions over arrays (or scalars). Ops that are one NumPy
    function are in :data:`NUMPY_FUNCTIONS`; what this class leaves out, Inductor's
    ``OpDecompositions`` builds from these (``relu`` as ``maximum``, ``sigmoid`` from
    ``exp``...), and Python's operators serve ``+``, ``*``, ``/``, ``<``, ``&``. The ops
    left after that have no NumPy source: :func:`no_numpy_source` says so."""

    @staticmethod
    def constant(value, dtype: torch.dtype) -> CSEVariable:
        """A constant is written where it is used (``np.maximum(tmp2, 0)``), not on a line of its own."""
        text = constant_text(value, dtype)
        cse = V.kernel.cse
        return cse.varname_map.get(text) or cse.namedvar(text, dtype=dtype)

    @staticmethod
    def to_dtype(x, dtype: torch.dtype, src_dtype: torch.dtype | None = None, use_compute_types: bool = True) -> str:
        return f"np.asarray({x}).astype({np_type(dtype)})"

    @staticmethod
    def to_dtype_bitcast(x, dtype: torch.dtype, src_dtype: torch.dtype) -> str:
        return f"np.asarray({x}).view({np_type(dtype)})"

    @staticmethod
    def index_expr(expr: sympy.Expr, dtype: torch.dtype) -> str:
        kernel = V.kernel
        index = kernel.prepare_indexing(expr)
        return f"np.asarray({kernel.index_to_str(index)}).astype({np_type(dtype)})"

    @staticmethod
    def value_expr(expr: sympy.Expr, dtype: torch.dtype) -> str:
        """An index expression used as a value (NumPy's index arrays are int64 already)."""
        return NumpyOverrides.index_expr(expr, dtype)

    @staticmethod
    def rand(seed, offset) -> str:
        return f"loops.rand({seed}, {offset})"

    @staticmethod
    def randn(seed, offset) -> str:
        return f"loops.randn({seed}, {offset})"

    @staticmethod
    def randint64(seed, offset, low, high) -> str:
        return f"loops.randint64({seed}, {offset}, {low}, {high})"

    @staticmethod
    def masked(mask, body: Callable, other) -> CSEVariable:
        """``body()`` where ``mask`` holds, else ``other``; loads inside read only where it holds."""
        kernel = V.kernel
        with kernel.mask_loads(mask, other) as new_mask:
            result = body()
        # Inductor asks Triton-style backends (the default for a PrivateUse1 device) for the
        # dtype of masked's result, so it is a typed variable rather than text.
        return kernel.cse.generate(kernel.compute, f"np.where({new_mask}, {result}, {literal(other)})",
                                   dtype=result.dtype)

    @staticmethod
    def rsqrt(x) -> str:
        return f"(1 / np.sqrt({x}))"

    @staticmethod
    def erf(x) -> str:
        return f"sdk.erf({x})"  # NumPy has no erf; the chip's kernel library does

    @staticmethod
    def truncdiv(a, b) -> str:
        return f"np.trunc(np.divide({a}, {b})).astype(np.result_type({a}, {b}))"


# Inductor's pointwise ops that are one NumPy function of the same operands. Inductor's
# ``mod`` is C's remainder (sign of the dividend, what ``remainder`` is decomposed from);
# NumPy's ``remainder`` is Python's ``%``, as torch's. ``exp2``, ``expm1``, ``log1p``, ``log2``
# would otherwise be decomposed into ``exp``/``log`` and lose precision near 0.
NUMPY_FUNCTIONS = {
    "abs": "np.abs", "exp": "np.exp", "exp2": "np.exp2", "expm1": "np.expm1", "log": "np.log",
    "log1p": "np.log1p", "log2": "np.log2", "sqrt": "np.sqrt", "sin": "np.sin", "cos": "np.cos",
    "tan": "np.tan", "asin": "np.arcsin", "acos": "np.arccos", "atan": "np.arctan", "sinh": "np.sinh",
    "cosh": "np.cosh", "tanh": "np.tanh", "asinh": "np.arcsinh", "acosh": "np.arccosh",
    "atanh": "np.arctanh", "floor": "np.floor", "ceil": "np.ceil", "trunc": "np.trunc", "round": "np.round",
    "sign": "np.sign", "signbit": "np.signbit", "isnan": "np.isnan", "isinf": "np.isinf",
    "logical_not": "np.logical_not", "logical_and": "np.logical_and", "logical_or": "np.logical_or",
    "logical_xor": "np.logical_xor", "maximum": "np.maximum", "minimum": "np.minimum", "where": "np.where",
    "pow": "np.power", "floordiv": "np.floor_divide", "mod": "np.fmod", "fmod": "np.fmod",
    "remainder": "np.remainder", "atan2": "np.arctan2", "hypot": "np.hypot", "copysign": "np.copysign",
    "nextafter": "np.nextafter",
}


def numpy_call(function: str):
    """The op that prints as ``function(operand, ...)``."""
    return staticmethod(lambda *operands: f"{function}({', '.join(map(str, operands))})")


def no_numpy_source(op: str):
    """The op that stops compilation, naming itself: the chip has no NumPy source for it."""
    def missing(*args, **kwargs):
        raise NotImplementedError(f"toychip: Inductor lowered an op to ops.{op}, and the chip has no NumPy "
                                  f"source for it (toychip.inductor_codegen.NumpyOverrides)")
    return staticmethod(missing)


for _op, _function in NUMPY_FUNCTIONS.items():
    setattr(NumpyOverrides, _op, numpy_call(_function))
for _op in dir(OpsHandler):  # what neither the chip nor Inductor's decompositions provide
    if not _op.startswith("_") and getattr(NumpyOverrides, _op) is getattr(OpsHandler, _op):
        setattr(NumpyOverrides, _op, no_numpy_source(_op))
del _op, _function


# Reductions: NumPy's function for each of Inductor's reduction types but Welford's.
REDUCTIONS = {"sum": "np.sum", "prod": "np.prod", "max": "np.max", "min": "np.min", "any": "np.any",
              "argmax": "np.argmax", "argmin": "np.argmin"}


def reduction_source(reduction_type: str, block: str, acc_type: str) -> str:
    """NumPy source reducing ``block`` (the value broadcast to the block's shape, so that a
    value that does not vary along the reduction still counts once per column) over the
    block's last axis, keeping that axis: one column per row of the block. ``acc_type``: the
    NumPy type sums and products accumulate in."""
    if reduction_type not in REDUCTIONS:
        raise NotImplementedError(f"toychip: Inductor asked for a {reduction_type} reduction, which the chip "
                                  "has no NumPy source for")
    accumulate = f", dtype={acc_type}" if reduction_type in ("sum", "prod") else ""
    return f"{REDUCTIONS[reduction_type]}({block}, axis=-1, keepdims=True{accumulate})"


# A line of the body that computes a value, and one that only loads it.
COMPUTED = re.compile(r"tmp\d+ = ")
LOADED = re.compile(r"tmp\d+ = (dtypes\.widen\()?\w*ptr\d+\[")


class NumpyKernel(SIMDKernel):
    """One fused group of Inductor loops as a NumPy function over flat buffers."""

    overrides = NumpyOverrides  # type: ignore[assignment]
    kexpr = staticmethod(numpy_expr)

    def dtype_to_str(self, dtype: torch.dtype) -> str:
        return np_type(dtype)

    def want_no_x_dim(self) -> bool:
        return False

    def should_use_persistent_reduction(self) -> bool:
        return True  # the whole reduction is one block: no reduction loop

    def check_bounds(self, expr, size, lower, upper) -> None:
        pass  # NumPy's own indexing raises IndexError out of bounds

    # -- the iteration space ---------------------------------------------------------
    def block_shape(self) -> tuple[str, ...]:
        """The block's shape: one axis per active range (x, then the reduction)."""
        return tuple(f"{tree.prefix}numel" for tree in self.active_range_trees())

    def iteration_ranges_codegen_header(self, entry: IterationRangesRoot, code: IndentedBuffer) -> None:
        axes = [tree.prefix for tree in self.active_range_trees()]
        position = axes.index(entry.prefix)
        shape = ", ".join(":" if i == position else "None" for i in range(len(axes)))
        suffix = f"[{shape}]" if len(axes) > 1 else ""
        code.writeline(f"{entry.prefix}index = np.arange({entry.prefix}numel){suffix}")

    def codegen_iteration_ranges_entry(self, entry: IterationRangesEntry) -> None:
        self.indexing_code.writeline(f"{entry.name} = {self.kexpr(self.rename_indexing(entry.expr))}")

    # -- memory ----------------------------------------------------------------------
    def load(self, name: str, index: sympy.Expr) -> CSEVariable:
        var = self.args.input(name)
        index_text = self.index_to_str(self.prepare_indexing(index))
        if self._load_mask is not None:  # read only where the mask holds (elsewhere index 0)
            index_text = f"np.where({self._load_mask}, {index_text}, 0)"
        line = f"{var}[{index_text}]"
        dtype = V.graph.get_dtype(name)
        if dtype in HALF_DTYPES:
            line = f"dtypes.widen({line})"
        return self.cse.generate(self.compute, line, dtype=torch.float32 if dtype in HALF_DTYPES else dtype)

    def store(self, name: str, index: sympy.Expr, value: CSEVariable, mode=None) -> None:
        var = self.args.output(name)
        index = self.prepare_indexing(index)
        self.compute.writeline(DeferredLine(name, self.store_line(var, name, index, value, mode)))

    def store_reduction(self, name: str, index: sympy.Expr, value: CSEVariable) -> None:
        self.store(name, index, value)  # one block: the reduced value is there to store at once

    def store_line(self, var: str, name: str, index: sympy.Expr, value, mode) -> str:
        dtype = V.graph.get_dtype(name)
        value_text = f"dtypes.narrow({value}, torch.{str(dtype).split('.')[1]})" if dtype in HALF_DTYPES else str(value)
        index_text = self.index_to_str(index)
        if mode == "atomic_add":
            return f"np.add.at({var}, {index_text}, {value_text})"
        if mode is not None:
            raise NotImplementedError(f"toychip: store mode {mode}")
        if not index.free_symbols & set(self.range_tree_nodes):  # one element: the block agrees on it
            value_text = f"np.ravel({value_text})[0]"
        return f"{var}[{index_text}] = {value_text}"

    # -- reductions ------------------------------------------------------------------
    def reduction(self, dtype, src_dtype, reduction_type, value):
        cache_key = (src_dtype, reduction_type, value)
        if cache_key in self.cse.reduction_cache:
            return self.cse.reduction_cache[cache_key]
        shape = ", ".join(self.block_shape())
        if reduction_type == "welford_combine":  # a split reduction's second kernel: a call
            parts = ", ".join(f"np.broadcast_to({v}, ({shape}))" for v in value)
            combined = self.cse.generate(self.compute, f"loops.welford_combine({parts})")
            result = tuple(self.cse.generate(self.compute, f"{combined}[{i}]", dtype=dtype) for i in range(3))
        elif reduction_type == "welford_reduce":  # mean, sum of squared deviations (m2), count
            block = f"np.broadcast_to({value}, ({shape}))"
            mean = self.cse.generate(self.compute, f"np.mean({block}, axis=-1, keepdims=True)", dtype=dtype)
            m2 = self.cse.generate(self.compute, f"np.sum(np.square({block} - {mean}), axis=-1, keepdims=True)",
                                   dtype=dtype)
            rows, columns = self.block_shape()
            count = self.cse.generate(self.compute, f"np.full(({rows}, 1), {columns}, dtype={np_type(dtype)})",
                                      dtype=dtype)
            result = (mean, m2, count)
        else:
            block = f"np.broadcast_to({value}, ({shape}))"
            result = self.cse.generate(self.compute, reduction_source(reduction_type, block, np_type(dtype)),
                                       dtype=dtype)
        self.cse.reduction_cache[cache_key] = result
        return result

    # -- the kernel's source and its call --------------------------------------------
    def buffer_bytes(self) -> int:
        """Bytes the kernel moves: each input and output buffer once."""
        names = [*self.args.input_buffers, *self.args.output_buffers, *self.args.inplace_buffers]
        total = 0
        for name in dict.fromkeys(names):
            if name in V.graph.removed_buffers or name in self.removed_buffers:
                continue
            buffer = V.graph.try_get_buffer(name)
            if buffer is not None:
                numel = V.graph.sizevars.optimization_hint(buffer.get_numel())
                total += int(numel) * buffer.get_dtype().itemsize
        return total

    def ops_per_point(self) -> int:
        """Computed values per point of the block (loads and stores are not operations)."""
        lines = (str(line) for line in self.compute._lines)
        return sum(1 for line in lines if COMPUTED.match(line) and not LOADED.match(line))

    def block_points(self) -> int:
        points = 1
        for tree in self.range_trees:
            points *= int(V.graph.sizevars.optimization_hint(tree.numel))
        return points

    def codegen_kernel(self, name: str | None = None) -> str:
        argdefs, _, _, _ = self.args.python_argdefs()
        params = [arg.name for arg in argdefs] + [f"{tree.prefix}numel" for tree in self.active_range_trees()]
        code = IndentedBuffer()
        flops = max(self.ops_per_point(), 1) * self.block_points()
        aten_ops = sum(origin.op == "call_function" for origin in aggregate_origins(self.features.node_schedule))
        code.writeline(f"@loops.kernel(nbytes={self.buffer_bytes()}, flops={flops}, aten_ops={aten_ops})")
        code.writeline(f"def {name or 'KERNEL_NAME'}({', '.join(params)}):")
        with code.indent():
            for tree in self.active_range_trees():
                self.iteration_ranges_codegen_header(tree, code)
            code.splice(self.indexing_code)
            code.splice(self.compute)
        return code.getvalue()

    def call_kernel(self, name: str, node=None, deallocate_ws: bool = True) -> None:
        wrapper = V.graph.wrapper_code
        _, call_args, _, _ = self.args.python_argdefs()
        for tree in self.active_range_trees():
            numel = tree.numel
            call_args.append(str(numel) if isinstance(numel, (int, sympy.Integer)) else
                             wrapper.generate_numel_expr(name, tree))
        wrapper.generate_kernel_call(name, call_args, device=V.graph.get_current_device_or_throw(), triton=False)


class NumpyScheduling(SIMDScheduling):
    """Inductor's SIMD scheduler (fusion, reductions) printing :class:`NumpyKernel`s."""

    kernel_type = NumpyKernel  # type: ignore[assignment]

    @classmethod
    def get_backend_features(cls, device: torch.device) -> OrderedSet[BackendFeature]:
        """A chip with one compute unit reduces a whole tensor in one kernel; with more,
        Inductor may split a long reduction with few results in two, for parallelism."""
        if get_spec().compute_units == 1:
            return OrderedSet([BackendFeature.REDUCE_TO_SINGLE_ELEMENT])
        return OrderedSet()

    @classmethod
    def select_tiling(cls, node_schedule, numel, reduction_numel=sympy.S.One, coalesce_analysis=None):
        return cls.create_tiling([numel], [reduction_numel])

    @classmethod
    def get_tiling_and_scores(cls, node_schedule, numel, reduction_numel=sympy.S.One, coalesce_analysis=None):
        return cls.create_tiling([numel], [reduction_numel]), None

    def define_kernel(self, src_code: str, node_schedule, kernel: NumpyKernel) -> str:
        """Put the kernel's ``def`` into the wrapper module, once per distinct source."""
        wrapper = V.graph.wrapper_code
        if src_code in wrapper.src_to_kernel:
            return wrapper.src_to_kernel[src_code]
        fused_name = get_fused_kernel_name(node_schedule, "original_aten")
        kernel_name = f"toychip_{fused_name}_{wrapper.next_kernel_suffix()}"
        wrapper.src_to_kernel[src_code] = kernel_name
        origins, detailed_origins = get_kernel_metadata(node_schedule, wrapper)
        # A def, where Triton and C++ kernels are an expression (async_compile.triton(...)).
        wrapper.header.splice(f"\n\n{origins}\n{detailed_origins}\n{src_code.replace('KERNEL_NAME', kernel_name)}")
        return kernel_name
