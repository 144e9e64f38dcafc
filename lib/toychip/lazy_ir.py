"""A plain-data view of a pending lazy graph: what plug-ins and the graph hash see.

The lazy executor (:mod:`toychip.lazy_tensor`) keeps its IR as linked ``LazyNode``
objects. Plug-ins written by a learner -- a trace-cache key, a fusion policy -- get the
same graph as a list of frozen :class:`IRNode` records instead: indices instead of
pointers, strings instead of ATen objects, tuples instead of lists, so a record can be
printed, hashed and compared. Example for ``relu(x * 2.0)``::

    IRNode(index=0, op='device_data', kind='input', inputs=(), constants=(), shape=(4, 5), ...)
    IRNode(index=1, op='aten.mul.Tensor', kind='pointwise', inputs=(0,), constants=(2.0,), ...)
    IRNode(index=2, op='aten.relu.default', kind='pointwise', inputs=(1,), constants=(), ...)

:func:`graph_hash` is the digest of the structure only (ops, shapes, dtypes, non-float
constants), like ``torch._lazy.computation.get_graph_hash``: tensor values and float
scalars do not change it. Chapter 04 teaches this module.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass

from .fusion import kind_of


@dataclass(frozen=True)
class IRNode:
    """One node of a pending lazy graph, as plain data.

    * ``op``: ``"device_data"`` for a materialised input, else the ATen overload's name
      (``"aten.add.Tensor"``) or ``"getitem"`` (one output of a multi-output op);
    * ``kind``: ``"input"``, ``"pointwise"``, ``"matmul"``, ``"reduction"``, ``"view"``
      or ``"other"`` -- what the scheduler may fuse;
    * ``inputs`` / ``users``: indices of producer / consumer nodes;
    * ``constants``: the non-tensor arguments in call order, keyword ones as
      ``(name, value)`` pairs (float constants are program inputs at run time);
    * ``is_output``: a live tensor needs this value after the graph runs.
    """

    index: int
    op: str
    kind: str
    inputs: tuple
    constants: tuple
    shape: tuple
    dtype: str
    users: tuple
    is_output: bool


def _frozen(value):
    """Lists become tuples, so constants are hashable."""
    if isinstance(value, (list, tuple)):
        return tuple(_frozen(v) for v in value)
    return value


def _split(value, index: dict, inputs: list, constants: list) -> None:
    """Sort one argument into producer indices (tensors) or constants."""
    if id(value) in index:
        inputs.append(index[id(value)])
    elif isinstance(value, (list, tuple)) and any(id(v) in index for v in value):
        for v in value:
            _split(v, index, inputs, constants)
    else:
        constants.append(_frozen(value))


def _op_name(target) -> str:
    if target == "data":
        return "device_data"
    return "getitem" if getattr(target, "__name__", "") == "getitem" else str(target)


def describe(order, outputs) -> list[IRNode]:
    """``order`` (producers first) as :class:`IRNode` records; ``outputs`` are the live roots."""
    index = {id(n): i for i, n in enumerate(order)}
    users: list[list[int]] = [[] for _ in order]
    records = []
    live = {id(n) for n in outputs}
    for i, node in enumerate(order):
        inputs, constants = [], []
        for arg in node.args:
            _split(arg, index, inputs, constants)
        for name, arg in node.kwargs.items():
            if id(arg) in index:
                inputs.append(index[id(arg)])
            else:
                constants.append((name, _frozen(arg)))
        for producer in dict.fromkeys(inputs):
            users[producer].append(i)
        meta = node.meta
        shape = tuple(meta.shape) if hasattr(meta, "shape") else ()
        dtype = str(meta.dtype).removeprefix("torch.") if hasattr(meta, "dtype") else "tuple"
        kind = "input" if node.target == "data" else kind_of(node.target)
        records.append((i, _op_name(node.target), kind, tuple(inputs), tuple(constants), shape,
                        dtype, id(node) in live))
    return [IRNode(i, op, kind, inputs, constants, shape, dtype, tuple(users[i]), is_output)
            for i, op, kind, inputs, constants, shape, dtype, is_output in records]


def graph_hash(signature) -> str:
    """A 16-hex-digit digest of a structural signature, the same in every process.

    Python's ``hash()`` of strings changes per process (``PYTHONHASHSEED``); the repr of a
    signature (ops, shapes, dtypes, ints) does not.
    """
    return hashlib.blake2b(repr(signature).encode(), digest_size=8).hexdigest()
