"""Lazy mode: record an IR instead of running kernels; compile and run it on demand.

When you write ``c = a + b`` inside ``with toychip.lazy():``, nothing runs: ``c`` is a
toychip tensor whose storage holds an IR node (``storage._lazy``) instead of a buffer.
The graph runs ("materialises") only when a value is needed:

* ``.cpu()``, ``.item()``, ``print`` -- any kernel that reads a pending buffer;
* before a CPU fallback (the fallback reads its inputs);
* ``toychip.mark_step()`` and the end of the ``with`` block (everything still alive).

Every materialisation is logged with its reason (``lazy_metrics().sync_reasons``):
``item``, ``host_copy`` (``.cpu()``, ``.tolist()``), ``print`` (printing reads the
buffer with dispatch modes switched off), ``data_dependent_shape`` (``nonzero``, boolean
masks), ``fallback`` (an op without a chip kernel), ``eager_op`` / ``eager_write`` (an
op that must run eagerly, e.g. in place on part of a tensor), ``memory_replaced`` (a
storage that a pending graph reads gets new memory: ``UntypedStorage.resize_``, an ``out=``
result of another shape), ``mark_step``, ``exit`` and ``explicit`` (a direct :func:`sync` call).

At materialisation the pending graph is cut to what live tensors need (dead-code
removal), turned into an FX graph, scheduled with pointwise fusion and compiled to Python
(:mod:`toychip.codegen`). The compiled program is cached by the graph's *structure*
(ops, shapes, dtypes; float scalars are program inputs, as in LTC/XLA), so a repeated
training step reuses it -- visible as ``lazy_metrics().cache_hits``. Both the cache key
and the fusion policy can be replaced: ``toychip.lazy(cache_key=fn, fusion=fn)`` with
functions of the graph's :class:`toychip.lazy_ir.IRNode` list.

In-place ops on whole tensors (an optimiser's ``p.add_(...)``) are recorded as their
functional form and the storage is re-pointed at the new node -- functionalisation in
miniature. Interception is a ``TorchDispatchMode``: it sees every ATen op below autograd,
forward and backward. Chapter 04 teaches this module.
"""
from __future__ import annotations

import contextlib
import copy
import operator
import weakref
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, NamedTuple

import numpy as np
import torch
import torch.fx as fx
from torch.utils._python_dispatch import TorchDispatchMode

from . import memory, runtime
from .codegen import Program, generate
from .decompositions import GRAPH_DECOMPOSITIONS
from .fallback import FALLBACK_COUNTS
from .fusion import FusionError, KernelGroup, fixed_groups, schedule
from .lazy_ir import IRNode, describe, graph_hash as _digest
from .memory import as_numpy
from .op_table import OP_TABLE, KernelDeclined, foreach_calls, foreach_element_op

aten = torch.ops.aten


class LazyNode:
    """One IR node: ``target(*args, **kwargs)``; tensor arguments are other nodes.

    ``target`` is an ATen overload, ``operator.getitem`` (one output of a multi-output
    op), or ``"data"`` for a materialised input (``value`` holds its array, like LTC's
    DeviceData, and ``owner`` the storage whose memory that array shows, so the memory
    lives as long as the node). ``meta`` is the output as a meta tensor (shape and dtype, no data).
    """

    __slots__ = ("target", "args", "kwargs", "meta", "value", "owner", "__weakref__")

    def __init__(self, target, args=(), kwargs=None, meta=None, value=None, owner=None):
        self.target, self.args, self.kwargs = target, args, kwargs or {}
        self.meta, self.value, self.owner = meta, value, owner

    def __repr__(self) -> str:
        return f"LazyNode({self.target})"


class SyncEvent(NamedTuple):
    """One materialisation: why it happened, the op that needed the value, graph size."""

    reason: str
    op: str
    nodes: int


@dataclass
class LazyMetrics:
    """Counters of lazy execution, like ``torch._lazy.metrics``.

    ``cache_misses`` counts compilations (LTC's ``UncachedCompile``), ``cache_hits``
    reuses (``CachedCompile``); ``false_hits`` counts keys that matched a program compiled
    for a *different* graph (a too-coarse plugged-in key): that program is not run, the
    graph is compiled again. ``fallback_ops`` counts CPU fallbacks inside lazy blocks by
    op, like LTC's ``aten::*`` counters.
    """

    nodes_recorded: int = 0
    graphs_executed: int = 0
    nodes_executed: int = 0
    dead_nodes_removed: int = 0
    cache_hits: int = 0
    cache_misses: int = 0
    false_hits: int = 0
    sync_reasons: Counter = field(default_factory=Counter)
    fallback_ops: Counter = field(default_factory=Counter)
    sync_log: list[SyncEvent] = field(default_factory=list, repr=False)
    last_program: Program | None = field(default=None, repr=False)


@dataclass(frozen=True)
class LazyOptions:
    """Plug-ins of the lazy executor (``None``: the built-in behaviour).

    ``cache_key(nodes: list[IRNode]) -> hashable`` decides which graphs share a compiled
    program; ``fusion(nodes: list[IRNode]) -> list[list[int]]`` decides which nodes run
    as one kernel (see :func:`toychip.fusion.check_group` for what is allowed).
    """

    cache_key: Callable | None = None
    fusion: Callable | None = None


_metrics = LazyMetrics()
_options = LazyOptions()
_pending: list = []              # weakrefs to storages whose value is a pending node
_recorded_since_sync = 0
_cache: dict = {}                # (options, key) -> (structural signature, Program)
_meta_cache: dict = {}           # (op, input metas, constants) -> output meta
_data_nodes: dict = {}           # (storage id, view) -> data node, for this pending graph
_eager_call = None               # (op, args, kwargs, declined) running eagerly under LazyMode
_fallbacks_at_entry: Counter | None = None   # FALLBACK_COUNTS when the outermost lazy block began


def lazy_metrics() -> LazyMetrics:
    """A snapshot of the lazy counters (fallbacks of the open lazy block included)."""
    snapshot = copy.copy(_metrics)
    snapshot.sync_reasons = Counter(_metrics.sync_reasons)
    snapshot.sync_log = list(_metrics.sync_log)
    snapshot.fallback_ops = _metrics.fallback_ops + _open_block_fallbacks()
    return snapshot


def reset_lazy_metrics() -> None:
    global _metrics, _fallbacks_at_entry
    _metrics = LazyMetrics()
    if _fallbacks_at_entry is not None:
        _fallbacks_at_entry = Counter(FALLBACK_COUNTS)


def _open_block_fallbacks() -> Counter:
    if _fallbacks_at_entry is None:
        return Counter()
    return FALLBACK_COUNTS - _fallbacks_at_entry


def clear_cache() -> None:
    """Forget compiled graphs (the next step compiles again)."""
    _cache.clear()


# --------------------------------------------------------------------------- recording
def _signature(value):
    """Hashable description of an argument for the meta cache."""
    if isinstance(value, torch.Tensor):
        return ("T", tuple(value.shape), tuple(value.stride()), value.dtype)
    if isinstance(value, (list, tuple)):
        return tuple(_signature(v) for v in value)
    return value


def _to_meta(value):
    if isinstance(value, torch.Tensor):
        return torch.empty_strided(value.shape, value.stride(), dtype=value.dtype, device="meta")
    if isinstance(value, (list, tuple)):
        return type(value)(_to_meta(v) for v in value)
    return value


def _output_meta(op, args, kwargs):
    """Output shape/dtype via the op's meta kernel, memoised (a meta call costs ~300 us)."""
    key = (op, _signature(args), _signature(tuple(sorted(kwargs.items()))))
    meta = _meta_cache.get(key)
    if meta is None:
        meta = _meta_cache[key] = op(*_to_meta(args), **_to_meta(kwargs))
    return meta


def _ir_value(t: torch.Tensor):
    """The IR node that stands for tensor ``t`` (a data node if it is materialised)."""
    storage = t.untyped_storage()
    node = getattr(storage, "_lazy", None)
    if node is None:
        key = (id(storage), tuple(t.shape), tuple(t.stride()), t.storage_offset())
        node = _data_nodes.get(key)
        if node is None:
            array = as_numpy(t)
            meta = torch.empty(array.shape, dtype=t.dtype, device="meta")
            node = _data_nodes[key] = LazyNode("data", meta=meta, value=array, owner=storage)
        return node
    if (tuple(t.shape) == tuple(node.meta.shape) and t.storage_offset() == 0
            and t.is_contiguous()):
        return node
    return _record_node(aten.as_strided.default,
                        (node, list(t.shape), list(t.stride()), t.storage_offset()), {},
                        torch.empty(t.shape, dtype=t.dtype, device="meta"))


def _ir_args(value):
    if isinstance(value, torch.Tensor):
        return _ir_value(value)
    if isinstance(value, (list, tuple)):
        return type(value)(_ir_args(v) for v in value)
    return value


def _record_node(target, args, kwargs, meta) -> LazyNode:
    global _recorded_since_sync
    _metrics.nodes_recorded += 1
    _recorded_since_sync += 1
    return LazyNode(target, args, kwargs, meta)


def _lazy_tensor(node: LazyNode, device: int) -> torch.Tensor:
    """A toychip tensor whose storage holds ``node`` instead of a buffer. It gets memory of its
    size now, so that PyTorch's C++ (a storage ``clone``, ``deepcopy``) sees the right
    ``nbytes``; when the graph runs, its result replaces that memory (:func:`memory.replace_memory`)."""
    shape = node.meta.shape
    t = runtime.empty_strided(shape, memory.contiguous_strides(shape), node.meta.dtype, device)
    storage = t.untyped_storage()
    storage._lazy = node
    _pending.append(weakref.ref(storage))
    return t


def _record(op, args, kwargs):
    """Record ``op`` and return lazy output tensor(s)."""
    meta = _output_meta(op, args, kwargs)
    node = _record_node(op, _ir_args(args), _ir_args(kwargs), meta)
    device = memory.device_of(args)
    if isinstance(meta, tuple):
        return tuple(None if m is None else
                     _lazy_tensor(_record_node(operator.getitem, (node, i), {}, m), device)
                     for i, m in enumerate(meta))
    return _lazy_tensor(node, device)


def _functional(op: torch._ops.OpOverload) -> torch._ops.OpOverload:
    """``aten.add_.Tensor`` -> ``aten.add.Tensor``."""
    packet = getattr(aten, op.__name__.split(".")[0].rstrip("_"))
    return getattr(packet, op._overloadname)


def _owns_storage(t: torch.Tensor) -> bool:
    """Does ``t`` cover its whole storage (so rebinding the storage rebinds only ``t``)?"""
    storage = t.untyped_storage()
    node = getattr(storage, "_lazy", None)
    size = node.meta.numel() if node is not None else storage._buf.size
    return t.is_contiguous() and t.storage_offset() == 0 and t.numel() == size


def _record_inplace(op, args, kwargs):
    """``x.add_(y)`` on a whole tensor: record ``add(x, y)`` and re-point x's storage."""
    self = args[0]
    functional = _functional(op)
    meta = _output_meta(functional, args, kwargs)
    node = _record_node(functional, _ir_args(args), _ir_args(kwargs), meta)
    if meta.dtype != self.dtype:
        node = _record_node(aten._to_copy.default, (node,), {"dtype": self.dtype},
                            meta.to(self.dtype))
    _make_pending(self.untyped_storage(), node)
    return self


def _make_pending(storage, node: LazyNode) -> None:
    """``storage``'s value is now ``node``: its buffer and allocator block go until the graph runs."""
    for name in ("_buf", "_raw", "_block"):
        if hasattr(storage, name):
            delattr(storage, name)
    storage._lazy = node
    _pending.append(weakref.ref(storage))


def _written(entry, args) -> list:
    """(output index, tensor) for each argument the op writes (``OpEntry.writes``)."""
    return [(output, args[i]) for output, i in entry.writes
            if i < len(args) and isinstance(args[i], torch.Tensor)]


def _record_functionalized(func, entry, args, kwargs):
    """``native_batch_norm`` updating running stats: record ``entry.functional`` and
    re-point each written argument's storage at the functional op's output for it."""
    written = _written(entry, args)
    if not written:  # nothing to write (no running statistics): the op is functional
        return _record(func, args, kwargs)
    outputs = _record(entry.functional, args, kwargs)
    for output, target in written:
        _make_pending(target.untyped_storage(), outputs[output].untyped_storage()._lazy)
    return outputs[:len(func._schema.returns)]


def _try_record(func, entry, args, kwargs):
    """Record a chip op; ``None`` if it must run eagerly (it writes part of a storage)."""
    if entry.writes:
        if all(_owns_storage(t) for _, t in _written(entry, args)):
            return _record_functionalized(func, entry, args, kwargs)
        return None
    if not entry.inplace:
        return _record(func, args, kwargs)
    return _record_inplace(func, args, kwargs) if _owns_storage(args[0]) else None


def _is_chip_tensor(value) -> bool:
    return isinstance(value, torch.Tensor) and value.device.type == "toychip"


def _tensors(args) -> list[torch.Tensor]:
    tensors = [a for a in args if isinstance(a, torch.Tensor)]
    return tensors + [t for a in args if isinstance(a, (list, tuple)) for t in a
                      if isinstance(t, torch.Tensor)]


def _all_chip(args) -> bool:
    tensors = _tensors(args)
    return bool(tensors) and all(_is_chip_tensor(t) for t in tensors)


def _declines(entry, args, kwargs) -> bool:
    """Would the kernel's adapter refuse these arguments (checked on shapes only)?"""
    if entry.adapt is None:
        return False
    try:
        entry.adapt(*args, **kwargs)
    except KernelDeclined:
        return True
    return False


class LazyMode(TorchDispatchMode):
    """Records chip ops; everything else (views, copies, fallbacks) runs eagerly.

    ``_foreach_*`` ops (the optimisers' multi-tensor path) are split into per-tensor ops
    and recorded one by one; an op without a kernel but with a chip decomposition
    (:mod:`toychip.decompositions`, e.g. ``gelu``) is recorded as the ops it decomposes to.
    """

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        global _eager_call
        kwargs = kwargs or {}
        element = foreach_element_op(func)
        if element is not None and _all_chip(args):
            results = [self.__torch_dispatch__(element, types, a, k)
                       for a, k in foreach_calls(func, element, args, kwargs)]
            return None if not func._schema.returns else results
        decomposition = GRAPH_DECOMPOSITIONS.get(func)
        if decomposition is not None and _all_chip(args):
            with self:  # record the ops it is made of
                return decomposition(*args, **kwargs)
        entry = OP_TABLE.get(func)
        declined = False
        if entry is not None and _all_chip(args):
            declined = _declines(entry, args, kwargs)
            recorded = None if declined else _try_record(func, entry, args, kwargs)
            if recorded is not None:
                return recorded
        if func._schema.is_mutable and any(_is_chip_tensor(t) for t in _tensors(args)):
            sync("eager_write", func)  # pending reads of the old value must run first
        previous, _eager_call = _eager_call, (func, args, kwargs, declined)
        try:
            return func(*args, **kwargs)
        finally:
            _eager_call = previous


# --------------------------------------------------------------------------- sync reasons
_COPIES = (aten._to_copy.default, aten.copy_.default)


def copies_to_host(func, args, kwargs) -> bool:
    """Is this ``_to_copy`` / ``copy_`` a download to the CPU (``.cpu()``, ``.tolist()``)?"""
    if func is aten._to_copy.default:
        device = kwargs.get("device")
        return device is not None and torch.device(device).type == "cpu"
    return func is aten.copy_.default and args[0].device.type == "cpu"


def sync_reason(func, args=(), kwargs=None, declined: bool = False) -> str:
    """Why running ``func(*args, **kwargs)`` eagerly needs the values of pending tensors.

    ``declined``: the op has a chip kernel that refused these arguments (runs on the CPU).
    """
    if func is aten._local_scalar_dense.default:
        return "item"
    if copies_to_host(func, args, kwargs or {}):
        return "host_copy"
    if torch.Tag.dynamic_output_shape in func.tags:
        return "data_dependent_shape"
    if declined or not (func in OP_TABLE or func.is_view or func in _COPIES):
        return "fallback"
    return "eager_op"


def _materialize_for_read(storage) -> None:
    """A kernel reads a pending buffer: run the graph, noting which op asked and why."""
    if _eager_call is None:  # no op under LazyMode: printing switches dispatch modes off
        sync("print")
    else:
        func, args, kwargs, declined = _eager_call
        sync(sync_reason(func, args, kwargs, declined), func)


# --------------------------------------------------------------------------- execution
def _live_roots() -> list:
    """Storages still alive whose value is a pending node (dead ones are dropped here)."""
    roots, seen = [], set()
    for ref in _pending:
        storage = ref()
        if storage is not None and hasattr(storage, "_lazy") and id(storage) not in seen:
            seen.add(id(storage))
            roots.append(storage)
    return roots


def _topo(nodes) -> list[LazyNode]:
    """Nodes reachable from ``nodes``, producers first."""
    order, seen = [], set()

    def visit(node):
        stack = [(node, False)]
        while stack:
            n, done = stack.pop()
            if done:
                order.append(n)
                continue
            if id(n) in seen:
                continue
            seen.add(id(n))
            stack.append((n, True))
            for a in _flat_nodes((n.args, n.kwargs)):
                stack.append((a, False))

    for n in nodes:
        visit(n)
    return order


def _flat_nodes(value):
    if isinstance(value, LazyNode):
        yield value
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _flat_nodes(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _flat_nodes(v)


def _is_lifted_scalar(value) -> bool:
    """Every float constant is a program input (LTC lifts even 0 and 1), so a new learning
    rate makes no new graph; ints stay in the graph (they are mostly sizes and dims)."""
    return isinstance(value, float)


def _build_graph(order, outputs):
    """An FX graph of ATen ops for ``order``; returns (graph, input values, signature, nodes).

    ``nodes[i]`` is the FX node of ``order[i]``.
    """
    graph = fx.Graph()
    env, inputs, sig = {}, [], []
    for node in order:
        if node.target == "data":
            env[node] = graph.placeholder(f"data_{len(inputs)}")
            inputs.append(node.value)
            sig.append(("data", tuple(node.meta.shape), node.meta.dtype))
        else:
            args = _graph_arg(node.args, graph, env, inputs, sig)
            kwargs = {k: _graph_arg(v, graph, env, inputs, sig) for k, v in node.kwargs.items()}
            env[node] = graph.call_function(node.target, args, kwargs)
            sig.append((node.target, _structure(node.args, order), _structure(node.kwargs, order),
                        _meta_key(node.meta)))
        env[node].meta["val"] = node.meta
    graph.output(tuple(env[n] for n in outputs))
    sig.append(("out", tuple(order.index(n) for n in outputs)))
    return graph, inputs, tuple(sig), [env[n] for n in order]


def _graph_arg(value, graph, env, inputs, sig):
    """An IR argument as an FX argument: nodes via ``env``, float scalars as new inputs.

    A module-level function, not a recursive closure: a closure that calls itself is a
    reference cycle, which would keep the graph's input buffers alive until the garbage
    collector happens to run -- and make ``profile().peak_bytes`` vary from run to run.
    """
    if isinstance(value, LazyNode):
        return env[value]
    if isinstance(value, (list, tuple)):
        return type(value)(_graph_arg(v, graph, env, inputs, sig) for v in value)
    if _is_lifted_scalar(value):
        placeholder = graph.placeholder(f"scalar_{len(inputs)}")
        inputs.append(value)
        sig.append("scalar")
        return placeholder
    return value


def _meta_key(meta):
    if isinstance(meta, tuple):
        return tuple(_meta_key(m) for m in meta)
    return None if meta is None else (tuple(meta.shape), meta.dtype)


def _structure(value, order):
    if isinstance(value, LazyNode):
        return ("node", order.index(value))
    if isinstance(value, (list, tuple)):
        return tuple(_structure(v, order) for v in value)
    if isinstance(value, dict):
        return tuple((k, _structure(v, order)) for k, v in sorted(value.items()))
    if _is_lifted_scalar(value):
        return "scalar"
    return value


@contextlib.contextmanager
def _fusion_policy(fusion, nodes, described):
    """Inside the block, the scheduler uses ``fusion``'s groups (None: the built-in ones)."""
    if fusion is None:
        yield
        return
    groups = fusion(described)
    with fixed_groups([[_call_node(nodes, described, i) for i in group] for group in groups]):
        yield


def _compile(graph, nodes, described) -> Program:
    """Generate the program, with the plugged-in fusion policy's groups if there is one."""
    with _fusion_policy(_options.fusion, nodes, described):
        return generate(fx.GraphModule(torch.nn.Module(), graph), f"lazy_graph_{len(_cache)}")


def _call_node(nodes, described, index):
    """The FX node for a policy's node index, refusing inputs and unknown indices."""
    if not isinstance(index, int) or not 0 <= index < len(nodes):
        raise FusionError(f"fusion policy returned node index {index!r}; the graph has "
                          f"nodes 0..{len(nodes) - 1}")
    if described[index].kind == "input":
        raise FusionError(f"fusion policy put input node {index} (device_data) in a group")
    return nodes[index]


def _program_for(order, outputs, graph, signature, nodes) -> Program:
    """The cached program for this graph, or a fresh compilation (counted in the metrics)."""
    plugged = _options.cache_key is not None or _options.fusion is not None
    described = describe(order, outputs) if plugged else None
    key = signature if _options.cache_key is None else _options.cache_key(described)
    slot = (_options, key)
    cached = _cache.get(slot)
    if cached is not None and cached[0] == signature:
        _metrics.cache_hits += 1
        return cached[1]
    if cached is not None:
        _metrics.false_hits += 1
    _metrics.cache_misses += 1
    program = _compile(graph, nodes, described)
    _cache[slot] = (signature, program)
    return program


def sync(reason: str = "explicit", op=None) -> None:
    """Materialise every live pending tensor: cut, compile (or reuse), run, store.

    ``reason`` and ``op`` say why (see the module docstring); they are logged.
    """
    global _recorded_since_sync
    roots = _live_roots()
    _pending.clear()
    _data_nodes.clear()
    if not roots:
        _recorded_since_sync = 0
        return
    outputs = [s._lazy for s in roots]
    order = _topo(outputs)
    graph, inputs, signature, nodes = _build_graph(order, outputs)
    program = _program_for(order, outputs, graph, signature, nodes)
    results = program.fn(*inputs)
    for storage, result in zip(roots, results):
        memory.replace_memory(storage, np.asarray(result), counted=False)  # booked, not counted by profiles (yet)
        del storage._lazy
    executed = sum(n.target != "data" for n in order)
    _metrics.graphs_executed += 1
    _metrics.nodes_executed += executed
    _metrics.dead_nodes_removed += max(_recorded_since_sync - executed, 0)
    _metrics.last_program = program
    _metrics.sync_reasons[reason] += 1
    _metrics.sync_log.append(SyncEvent(reason, str(op).removeprefix("aten.") if op else "", executed))
    _recorded_since_sync = 0


def mark_step() -> None:
    """End of a training step: run everything recorded so far (``torch._lazy.mark_step``)."""
    sync("mark_step")


@contextlib.contextmanager
def lazy(cache_key: Callable | None = None, fusion: Callable | None = None):
    """Record chip ops inside the block; materialise what is left when it ends.

    ``cache_key`` and ``fusion`` plug in a trace-cache key and a fusion policy for the
    block (see :class:`LazyOptions`).
    """
    global _options, _fallbacks_at_entry
    previous, _options = _options, LazyOptions(cache_key, fusion)
    outermost = _fallbacks_at_entry is None
    if outermost:
        _fallbacks_at_entry = Counter(FALLBACK_COUNTS)
    try:
        with LazyMode():
            yield
        sync("exit")
    finally:
        _options = previous
        if outermost:
            _metrics.fallback_ops.update(_open_block_fallbacks())
            _fallbacks_at_entry = None


def graph_hash(tensors=None) -> str:
    """Digest of the pending graph's structure (``torch._lazy.computation.get_graph_hash``).

    Stable across processes; changes with ops, shapes and dtypes, not with tensor values
    or float scalars (those are program inputs).
    """
    outputs = _outputs_of(tensors)
    order = _topo(outputs)
    return _digest(_build_graph(order, outputs)[2])


def pending_graph(tensors=None) -> list[IRNode]:
    """The pending graph as :class:`IRNode` records -- what ``cache_key``/``fusion`` receive."""
    outputs = _outputs_of(tensors)
    return describe(_topo(outputs), outputs)


def pending_schedule(tensors=None, fusion=None) -> tuple[fx.Graph, list[KernelGroup]]:
    """The pending graph as an FX graph, and the kernels materialisation would run for it
    (the built-in scheduler's, or those of a ``fusion`` policy) -- for visualisers."""
    outputs = _outputs_of(tensors)
    order = _topo(outputs)
    if not order:
        return fx.Graph(), []
    graph, _, _, nodes = _build_graph(order, outputs)
    with _fusion_policy(fusion, nodes, describe(order, outputs) if fusion else None):
        return graph, schedule(graph)


def _outputs_of(tensors) -> list[LazyNode]:
    if tensors is None:
        return [s._lazy for s in _live_roots()]
    return [t.untyped_storage()._lazy for t in tensors if hasattr(t.untyped_storage(), "_lazy")]


def pending_ir(tensors=None) -> list[LazyNode]:
    """The pending IR reachable from ``tensors`` (default: all live pending tensors)."""
    return _topo(_outputs_of(tensors))


def dump_ir(tensors=None) -> str:
    """The pending IR as text, one node a line (like ``torch._lazy.debug.dump_ir``)."""
    order = pending_ir(tensors)
    index = {id(n): i for i, n in enumerate(order)}

    def show(value):
        if isinstance(value, LazyNode):
            return f"%{index[id(value)]}"
        if isinstance(value, (list, tuple)):
            return "[" + ", ".join(show(v) for v in value) + "]"
        return repr(value)

    lines = []
    for i, node in enumerate(order):
        meta = node.meta if not isinstance(node.meta, tuple) else node.meta[0]
        shape = f"{str(meta.dtype).removeprefix('torch.')}{list(meta.shape)}"
        if node.target == "data":
            lines.append(f"%{i} = device_data() : {shape}")
            continue
        args = [show(a) for a in node.args] + [f"{k}={show(v)}" for k, v in node.kwargs.items()]
        lines.append(f"%{i} = {node.target}({', '.join(args)}) : {shape}")
    return "\n".join(lines)


memory.set_materializer(_materialize_for_read)


def _run_pending_readers(storage) -> None:
    """Before ``storage``'s memory is replaced (``resize_``, an ``out=`` result): a pending graph
    that reads it has a data node over that memory, so run the graphs first."""
    if any(key[0] == id(storage) for key in _data_nodes):
        sync("memory_replaced")


memory.set_pending_readers(_run_pending_readers)
