"""``torch.compile(model, backend="toychip")``: AOTAutograd, partitioning, fusion, codegen.

The pipeline a vendor's compile backend runs (chapter 06), in order:

1. Dynamo captures the Python program as an FX graph (``torch.compile``).
2. AOTAutograd traces it to ATen ops, *with* the backward, decomposed to core ATen.
3. :class:`ChipSupport` (an ``OperatorSupport``) says which nodes the chip can run;
   PyTorch's ``CapabilityBasedPartitioner`` groups them into *chip islands*; the other
   nodes stay in the outer graph as *CPU islands*, run through the CPU fallback.
4. Each chip island is scheduled (:mod:`toychip.fusion`) and turned into readable
   Python (:mod:`toychip.codegen`); ``print_generated_code()`` shows it.

Every compiled graph is kept in :data:`COMPILED` (newest last) for code printing and the
partition view. :func:`make_backend` builds the same backend with another AOTAutograd
partitioner (chapter 06: saving activations vs recomputing them).

``torch.compile`` finds the backend through the package's ``torch_dynamo_backends``
entry point (pyproject.toml), the way out-of-tree vendors register theirs: this module,
and with it Dynamo, loads only when a program is compiled, not at ``import toychip``.
"""
from __future__ import annotations

import operator
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.fx as fx
from torch._decomp import core_aten_decompositions
from torch._dynamo.backends.common import aot_autograd
from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner
from torch.fx.passes.operator_support import OperatorSupport

from . import dynamo_interface, ledger
from .codegen import Program, generate
from .decompositions import GRAPH_DECOMPOSITIONS
from .memory import NUMPY_DTYPE, as_numpy, device_of, wrap
from .op_table import GRAPH_TABLE, conv_supported, foreach_calls, foreach_element_op

aten = torch.ops.aten


def _tensors(value) -> list[torch.Tensor]:
    """The tensors of a node's ``val`` (one tensor, or a tuple of them)."""
    return [v for v in (value if isinstance(value, (list, tuple)) else (value,)) if isinstance(v, torch.Tensor)]


class ChipSupport(OperatorSupport):
    """A node runs on the chip if the op table has it, all its tensors are chip dtypes,
    and it makes chip tensors.

    The last rule keeps host work on the host: a non-capturable optimiser's step counters
    are CPU tensors, and ``step += 1`` on one is a CPU op, as in eager mode -- not a chip
    launch. (A CPU scalar may still be an input of a chip op, as eager mode allows.)
    """

    def is_node_supported(self, submodules, node: fx.Node) -> bool:
        if node.op != "call_function":
            return False
        if node.target is operator.getitem:
            return self.is_node_supported(submodules, node.args[0])
        if node.target not in GRAPH_TABLE:
            return False
        if node.target is aten.convolution.default and not conv_supported(node.args):
            return False
        outputs = _tensors(node.meta.get("val"))
        if any(t.device.type != "toychip" for t in outputs):
            return False
        inputs = [t for a in node.all_input_nodes for t in _tensors(a.meta.get("val"))]
        return all(t.dtype in NUMPY_DTYPE for t in outputs + inputs)


class ChipIsland(torch.nn.Module):
    """One chip island at run time: tensors in, generated program on NumPy, tensors out."""

    def __init__(self, program: Program):
        super().__init__()
        self.program = program

    def forward(self, *args):
        arrays = [as_numpy(a) if isinstance(a, torch.Tensor) else a for a in args]
        out = self.program.fn(*arrays)
        device = device_of(args)
        if not ledger.profiling():  # only a profile counts memory (toychip.memory)
            return tuple(wrap(o, device=device) for o in out) if isinstance(out, tuple) else wrap(out, device=device)
        # A view of an input (say t(weight), saved for the backward) is no new memory.
        inputs = {id(_owner(a)) for a in arrays if isinstance(a, np.ndarray)}
        if isinstance(out, tuple):
            return tuple(wrap(o, counted=id(_owner(o)) not in inputs, device=device) for o in out)
        return wrap(out, counted=id(_owner(out)) not in inputs, device=device)


def _owner(array):
    """The array that owns ``array``'s memory (itself, unless it is a view)."""
    base = getattr(array, "base", None)
    return array if base is None else base


@dataclass
class CompiledGraph:
    """What the backend made of one ATen graph (kept for printing and the views)."""

    kind: str                                   # "forward", "backward" or "inference"
    graph: fx.Graph                             # the ATen graph before partitioning
    partitions: list[set[str]]                  # chip islands, as node names
    programs: list[Program] = field(default_factory=list)
    gm: fx.GraphModule | None = None            # the partitioned, runnable module

    @property
    def launches(self) -> int:
        return sum(p.launches for p in self.programs)

    def code(self) -> str:
        return "\n\n".join(f"# ===== {self.kind} {p.name}\n{p.source}" for p in self.programs)


COMPILED: list[CompiledGraph] = []


def expand_foreach(gm: fx.GraphModule) -> None:
    """Replace each ``_foreach_*`` node by its per-tensor ops so they can be fused."""
    graph = gm.graph
    for node in list(graph.nodes):
        element = foreach_element_op(node.target) if node.op == "call_function" else None
        if element is None:
            continue
        vals = node.meta.get("val")
        with graph.inserting_before(node):
            parts = []
            for i, (args, kwargs) in enumerate(foreach_calls(node.target, element, node.args,
                                                             node.kwargs)):
                part = graph.call_function(element, args, kwargs)
                if vals is not None:
                    part.meta["val"] = vals[i]
                parts.append(part)
        for user in list(node.users):
            if user.target is operator.getitem:
                user.replace_all_uses_with(parts[user.args[1]])
                graph.erase_node(user)
        graph.erase_node(node)
    gm.recompile()


def _copy_graph(graph: fx.Graph) -> fx.Graph:
    """A copy of ``graph`` with its output node and node metadata."""
    copy = fx.Graph()
    copy.output(copy.graph_copy(graph, {}))
    for copied, node in zip(copy.nodes, graph.nodes):
        copied.meta = dict(node.meta)
    return copy


def _propose(gm: fx.GraphModule, kind: str):
    original = _copy_graph(gm.graph)  # kept intact for the partition view
    partitioner = CapabilityBasedPartitioner(gm, ChipSupport(), allows_single_node_partition=True)
    partitions = partitioner.propose_partitions()
    return partitioner, partitions, CompiledGraph(kind, original,
                                                  [{n.name for n in p.nodes} for p in partitions])


def partition_only(gm: fx.GraphModule) -> CompiledGraph:
    """Partition without compiling (for looking at a graph); ``gm`` is not modified."""
    return _propose(fx.GraphModule(gm, _copy_graph(gm.graph)), "uncompiled")[2]


def compile_graph(gm: fx.GraphModule, example_inputs, kind: str = "forward") -> CompiledGraph:
    """Partition ``gm`` into chip/CPU islands and compile every chip island."""
    expand_foreach(gm)
    partitioner, partitions, result = _propose(gm, kind)
    fused = partitioner.fuse_partitions(partitions)
    index = len(COMPILED)
    for node in list(fused.graph.nodes):
        if node.op == "call_module" and node.target.startswith("fused_"):
            program = generate(getattr(fused, node.target), f"graph{index}_{node.target}")
            result.programs.append(program)
            setattr(fused, node.target, ChipIsland(program))
    fused.recompile()
    result.gm = fused
    COMPILED.append(result)
    return result


def _compiler(kind: str):
    from functorch.compile import make_boxed_func

    def compile_fn(gm, example_inputs):
        return make_boxed_func(compile_graph(gm, example_inputs, kind).gm.forward)
    return compile_fn


def chip_decompositions() -> dict:
    """Core ATen decompositions, minus ops the chip has kernels for, plus the chip's own.

    Core ATen keeps ``_log_softmax`` (a core op) but decomposes ``nll_loss_forward`` into
    15 ATen calls, which the chip would run as several launches instead of one (chapter 06
    counts them): a vendor keeps whatever its library runs natively. Core ATen ops the chip
    lacks but can build from its kernels (``gelu``) are decomposed instead of becoming CPU
    islands (:mod:`toychip.decompositions`).
    """
    def native(op) -> bool:
        element = foreach_element_op(op) if isinstance(op, torch._ops.OpOverload) else None
        return op in GRAPH_TABLE or element in GRAPH_TABLE
    core = {op: fn for op, fn in core_aten_decompositions().items() if not native(op)}
    return {**core, **GRAPH_DECOMPOSITIONS}


def make_backend(partition_fn=None):
    """A toychip compile backend whose AOTAutograd splits the joint graph with ``partition_fn``.

    ``partition_fn(joint_module, joint_inputs, *, num_fwd_outputs, **kwargs)`` returns the
    (forward, backward) graph modules, like ``functorch.compile.default_partition`` (the
    default here) or ``min_cut_rematerialization_partition``; chapter 06 compares them on
    the simulated clock and in device memory (``profile.peak_bytes``)::

        chip = toychip.compiler.make_backend(partition_fn=min_cut_rematerialization_partition)
        torch.compile(model, backend=chip)
    """
    extra = {} if partition_fn is None else {"partition_fn": partition_fn}
    return aot_autograd(fw_compiler=_compiler("forward"), bw_compiler=_compiler("backward"),
                        inference_compiler=_compiler("inference"),
                        decompositions=chip_decompositions(),
                        # an optimiser step writes its inputs: keep the copy_ in the graph
                        keep_inference_input_mutations=True, **extra)


backend = make_backend()


def get_generated_code(index: int = -1) -> str:
    """Generated source of the ``index``-th compiled graph (default: the newest)."""
    return COMPILED[index].code()


def print_generated_code(index: int = -1) -> None:
    print(get_generated_code(index))


dynamo_interface.register()
