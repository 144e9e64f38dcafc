"""Plausible wrong answers to chapter 06's exercises, each with the belief it embodies; the checks must reject each one.

Self-contained (no import of the references): tests paste this module into notebooks
that are graded in the sandbox, where the solutions are hidden.
"""
import networkx as nx
import torch
from functorch.compile import aot_function, default_partition, make_boxed_func
from torch._decomp import core_aten_decompositions, get_decompositions


def aot_saved_bytes_every_output(fn, inputs, partition_fn):
    """Adds up every tensor the forward returns after the loss: inputs and aliases included."""
    saved = []

    def fw_compiler(gm, example_inputs):
        def run(args):
            outs = gm(*args)
            saved.extend(outs[1:])
            return outs
        run._boxed_call = True
        return run

    args = [t.detach().clone().requires_grad_() for t in inputs]
    aot_function(fn, fw_compiler, lambda gm, ex: make_boxed_func(gm.forward), partition_fn=partition_fn)(*args)
    return sum(t.nbytes for t in saved if isinstance(t, torch.Tensor))


def aot_saved_bytes_from_backward_inputs(fn, inputs, partition_fn):
    """Reads the backward graph's non-tangent inputs from their metadata: inputs, views of
    inputs (t(primals_1)) and aliases (detach) are all counted as new memory."""
    total = 0

    def bw_compiler(gm, example_inputs):
        nonlocal total
        for node in gm.graph.nodes:
            value = node.meta.get("val")
            if node.op == "placeholder" and not node.name.startswith("tangents") and isinstance(value, torch.Tensor):
                total += value.numel() * value.element_size()
        return make_boxed_func(gm.forward)

    args = [t.detach().clone().requires_grad_() for t in inputs]
    aot_function(fn, lambda gm, ex: make_boxed_func(gm.forward), bw_compiler, partition_fn=partition_fn)(*args).backward()
    return total


def eager_saved_bytes_every_pack(fn, inputs):
    """Adds up every packed tensor: saved inputs and tensors saved twice are counted."""
    total = 0

    def pack(t):
        nonlocal total
        total += t.nbytes
        return t

    args = [t.detach().clone().requires_grad_() for t in inputs]
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        fn(*args)
    return total


def recompute_nothing(joint_module, joint_inputs, *, num_fwd_outputs, **kwargs):
    """The default partitioner: saves every intermediate the backward reads."""
    return default_partition(joint_module, joint_inputs, num_fwd_outputs=num_fwd_outputs, **kwargs)


def save_what_backward_reads(problem):
    """The default partitioner's choice: save every needed value, recompute nothing."""
    return list(problem["needed"])


def min_cut_ignoring_expensive(problem):
    """A correct cut construction, but matmuls are not tied to the source: it recomputes them."""
    g = nx.DiGraph()
    for name, nbytes in problem["nodes"].items():
        g.add_edge(f"{name}_in", f"{name}_out", capacity=0 if name in problem["inputs"] else nbytes)
    for source, target in problem["edges"]:
        g.add_edge(f"{source}_out", f"{target}_in", capacity=float("inf"))
    for name in problem["inputs"]:
        g.add_edge("source", f"{name}_in", capacity=float("inf"))
    for name in problem["needed"]:
        g.add_edge(f"{name}_out", "sink", capacity=float("inf"))
    _, (reachable, _) = nx.minimum_cut(g, "source", "sink")
    return sorted(n for n in problem["nodes"]
                  if n not in problem["inputs"] and f"{n}_in" in reachable and f"{n}_out" not in reachable)


def core_aten_table():
    """PyTorch's core ATen decompositions: sigmoid, tanh and friends are core ops, kept as they are."""
    return core_aten_decompositions()


def pytorch_decompositions_only():
    """PyTorch's own decompositions for each activation: they lower to ops outside the chip's set."""
    aten = torch.ops.aten
    return get_decompositions([aten.silu, aten.mish, aten.softplus, aten.gelu, aten.sigmoid, aten.tanh])


WRONG_ANSWERS = [
    ("06.saved_activations", aot_saved_bytes_every_output,
     "Adds up every tensor the forward returns after the loss: inputs and aliases included."),
    ("06.saved_activations", aot_saved_bytes_from_backward_inputs,
     "Reads the backward graph's non-tangent inputs from their metadata: inputs, views of"),
    ("06.eager_saved", eager_saved_bytes_every_pack,
     "Adds up every packed tensor: saved inputs and tensors saved twice are counted."),
    ("06.recompute_partition", recompute_nothing,
     "The default partitioner: saves every intermediate the backward reads."),
    ("06.min_cut", save_what_backward_reads,
     "The default partitioner's choice: save every needed value, recompute nothing."),
    ("06.min_cut", min_cut_ignoring_expensive,
     "A correct cut construction, but matmuls are not tied to the source: it recomputes them."),
    ("06.decompositions", core_aten_table,
     "PyTorch's core ATen decompositions: sigmoid, tanh and friends are core ops, kept as they are."),
    ("06.decompositions", pytorch_decompositions_only,
     "PyTorch's own decompositions for each activation: they lower to ops outside the chip's set."),
]


def recompute_everything(joint_module, joint_inputs, *, num_fwd_outputs, **kwargs):
    """Recomputes every forward op the backward reads, matmuls included: least memory, but
    the backward pays for the matmuls again."""
    graph = joint_module.graph
    backward = set()
    for node in graph.nodes:
        if (node.op == "placeholder" and node.name.startswith("tangents")) or \
                any(a in backward for a in node.all_input_nodes):
            backward.add(node)
    copies = {}

    def recomputed(node, before):
        if node in backward or node.op != "call_function":
            return node
        if node not in copies:
            args = torch.fx.map_arg(node.args, lambda a: recomputed(a, before))
            kwargs_ = torch.fx.map_arg(node.kwargs, lambda a: recomputed(a, before))
            with graph.inserting_before(before):
                copies[node] = graph.call_function(node.target, args, kwargs_)
            copies[node].meta = {k: v for k, v in node.meta.items() if k != "partitioner_tag"}
        return copies[node]

    for node in list(graph.nodes):
        if node in backward and node.op != "output" and node.op != "placeholder":
            node.args = torch.fx.map_arg(node.args, lambda a: recomputed(a, node))
            node.kwargs = torch.fx.map_arg(node.kwargs, lambda a: recomputed(a, node))
    graph.lint()
    joint_module.recompile()
    return default_partition(joint_module, joint_inputs, num_fwd_outputs=num_fwd_outputs, **kwargs)


WRONG_ANSWERS.insert(4, ("06.recompute_partition", recompute_everything,
                         "Recomputes every forward op the backward reads, matmuls included: least memory, but"))
