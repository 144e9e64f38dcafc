"""Code generation: turn a scheduled graph into readable Python that calls the chip SDK.

The toy chip's equivalent of Inductor's ``output_code`` (``TORCH_LOGS=output_code``).
For one graph it writes

* a ``def kernel_N`` for every fused group -- the whole chain in one buffer, e.g.::

      def kernel_0(primals_3, primals_1, primals_2):
          # addmm -> relu  (for each element: buf = relu(bias + x @ w))
          buf = sdk.addmm(primals_3, primals_1, primals_2)
          buf = sdk.relu(buf, out=buf)
          return buf

* and one ``def graph_N`` that runs the kernels in order: ``chip.X(...)`` launches
  library kernel ``X`` and charges the simulated clock once; ``sdk.X`` is the raw kernel
  used inside a fused body (no launch of its own).

Used by :mod:`toychip.compiler` (chapter 06) and :mod:`toychip.lazy` (chapter 04).
"""
from __future__ import annotations

import math
import operator
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Callable

import numpy as np
import torch
import torch.fx as fx

from . import ledger
from .fusion import KernelGroup, node_kind, schedule
from .memory import NUMPY_DTYPE
from .kernels import KERNELS
from .op_table import GRAPH_TABLE, OpEntry


class ChipKernel:
    """A launchable kernel: calling it runs ``fn`` and charges one launch to the ledger."""

    def __init__(self, name: str, fn: Callable, flops: Callable, kind: str = "single"):
        self.name, self.fn, self.flops, self.kind = name, fn, flops, kind

    def __call__(self, *args, **kwargs):
        out = self.fn(*args, **kwargs)
        if ledger.charging() and self.kind != "view":
            outs = out if isinstance(out, tuple) else (out,)
            ledger.charge_kernel(self.name, ledger.array_bytes(args) + ledger.array_bytes(outs), self.flops(args, outs))
        return out


@dataclass
class Program:
    """Generated code for one graph: its source, the callable, and its kernel groups."""

    name: str
    source: str
    fn: Callable
    groups: list[KernelGroup]

    @property
    def launches(self) -> int:
        """Kernel launches per call (views launch nothing)."""
        return sum(g.kind != "view" for g in self.groups)


def _sdk_name(entry: OpEntry) -> str:
    """The name a table entry has in generated code: its kernel, or its ATen op if adapted.

    An adapted entry takes ATen's arguments, so it must not share a kernel's name.
    """
    if entry.adapt is None:
        return entry.kernel.name
    name = entry.op.__name__.split(".")[0]
    return f"aten_{name}" if name in KERNELS else name


def _render(value, names: dict) -> str:
    """Python source for one argument of a node."""
    if isinstance(value, fx.Node):
        return names[value]
    if isinstance(value, (list, tuple)):
        inner = ", ".join(_render(v, names) for v in value)
        if isinstance(value, list):
            return f"[{inner}]"
        return f"({inner}{',' if len(value) == 1 else ''})"
    if isinstance(value, torch.dtype):
        return f"np.{NUMPY_DTYPE[value].name}"
    if isinstance(value, float) and not math.isfinite(value):
        return f"float('{value}')"
    if isinstance(value, (torch.device, torch.layout, torch.memory_format)):
        return "None"
    return repr(value)


def _call(node: fx.Node, names: dict, namespace: str, out: str | None = None) -> str:
    if node.target is operator.getitem:
        return f"{names[node.args[0]]}[{node.args[1]}]"
    args = [_render(a, names) for a in node.args]
    args += [f"{k}={_render(v, names)}" for k, v in node.kwargs.items()]
    if out is not None:
        args.append(f"out={out}")
    return f"{namespace}.{_sdk_name(GRAPH_TABLE[node.target])}({', '.join(args)})"


def _reuses(producer: fx.Node, node: fx.Node) -> bool:
    """Can ``node`` write into ``producer``'s buffer (sole user, same shape/dtype, not 0-d)?"""
    a, b = producer.meta.get("val"), node.meta.get("val")
    return (len(producer.users) == 1 and isinstance(a, torch.Tensor)
            and isinstance(b, torch.Tensor) and a.dim() > 0
            and tuple(a.shape) == tuple(b.shape) and a.dtype == b.dtype)


def _fused_def(group: KernelGroup, names: dict) -> tuple[str, list[fx.Node], str]:
    """Source of one fused kernel, its external inputs, and its flop expression."""
    members = set(group.nodes)
    inputs: list[fx.Node] = []
    for node in group.nodes + group.stores:
        for arg in node.all_input_nodes:
            if arg not in members and arg not in inputs:
                inputs.append(arg)
    local = {n: names[n] for n in inputs}
    lines = [f"def {group.name}({', '.join(local[n] for n in inputs)}):",
             f"    # {group.label}  (one launch)"]
    temps = 0
    for node in group.nodes:
        reusable = [p for p in node.all_input_nodes if p in members and _reuses(p, node)]
        if reusable:
            target, out = local[reusable[0]], local[reusable[0]]
        else:
            target, out, temps = f"t{temps}", None, temps + 1
        lines.append(f"    {target} = {_call(node, local, 'sdk', out=out)}")
        local[node] = target
    for store in group.stores:
        lines.append(f"    {_call(store, local, 'sdk')}  # write back")
    lines.append(f"    return {local[group.root]}")
    matmuls = [n for n in group.nodes if node_kind(n) == "matmul"]
    pointwise = len(group.nodes) - len(matmuls)
    flops = f"{pointwise} * outs[0].size"
    if matmuls:
        head = matmuls[0]
        # every tensor argument in order: x.mm(x) passes the same input twice
        operands = ", ".join(f"ins[{inputs.index(arg)}]" for arg in head.args if isinstance(arg, fx.Node))
        flops = f"chip.{_sdk_name(GRAPH_TABLE[head.target])}.flops([{operands}], outs) + " + flops
    return "\n".join(lines), inputs, flops


def generate(gm: fx.GraphModule, name: str) -> Program:
    """Schedule ``gm``'s graph and generate its program (inputs and outputs are NumPy arrays)."""
    graph = gm.graph
    groups = schedule(graph)
    group_of = {n: g for g in groups for n in g.nodes}
    stored = {n: g for g in groups for n in g.stores}
    names = {n: n.name for n in graph.nodes}
    sdk, chip = {}, {}
    for node in graph.nodes:
        if node.op == "call_function" and node.target is not operator.getitem:
            entry = GRAPH_TABLE[node.target]
            key = _sdk_name(entry)
            sdk[key] = entry.run if entry.adapt is not None else entry.kernel.fn
            chip[key] = ChipKernel(key, sdk[key], entry.kernel.flops, entry.kernel.kind)

    defs, body = [], []
    placeholders = [names[n] for n in graph.nodes if n.op == "placeholder"]
    for node in graph.nodes:
        if node.op == "output":
            body.append(f"    return {_render(node.args[0], names)}")
            continue
        if node.op != "call_function":
            continue
        if node in stored:
            names[node] = names[node.args[0]]  # done inside the kernel that made the value
            continue
        group = group_of[node]
        if group.kind == "fused":
            if node is not group.root:
                continue  # a fused group runs where its last member was
            source, inputs, flops = _fused_def(group, names)
            defs.append(source)
            defs.append(f"{group.name} = ChipKernel('fused: {group.label}', {group.name}, "
                        f"lambda ins, outs: {flops})")
            names[node] = names[group.nodes[0]]
            for member in group.nodes:
                names[member] = names[group.nodes[0]]
            args = ", ".join(names[n] for n in inputs)
            body.append(f"    {names[node]} = {group.name}({args})")
        else:
            body.append(f"    {names[node]} = {_call(node, names, 'chip')}")
    source = "\n\n".join(defs + [f"def {name}({', '.join(placeholders)}):\n" + "\n".join(body)])
    scope = {"np": np, "sdk": SimpleNamespace(**sdk), "chip": SimpleNamespace(**chip),
             "ChipKernel": ChipKernel}
    exec(compile(source, f"<toychip {name}>", "exec"), scope)
    return Program(name, source, scope[name], groups)
