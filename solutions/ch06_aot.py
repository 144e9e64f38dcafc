"""Reference solutions of chapter 06 (AOTAutograd).

Each function body is injected into the instructor's copy of ``notebooks/06_aot.ipynb``
between ``### BEGIN SOLUTION`` / ``### END SOLUTION``, so a body may use only what the
notebook's import cell imports: ``torch``, ``nx`` (networkx), ``aot_function``,
``make_boxed_func``, ``default_partition`` and ``get_decompositions``.
"""
import networkx as nx
import torch
from functorch.compile import aot_function, default_partition, make_boxed_func
from torch._decomp import get_decompositions


def aot_saved_bytes(fn, inputs, partition_fn):
    """Bytes of the activations AOTAutograd's forward keeps for the backward.

    The forward graph returns ``(loss, *saved)``: the loss, then what the backward reads.
    Distinct storages are counted once; storages of the inputs cost nothing.
    """
    saved = []

    def fw_compiler(gm, example_inputs):
        def run(args):
            outs = gm(*args)
            saved.extend(outs[1:])  # fn returns one tensor; the rest is for the backward
            return outs
        run._boxed_call = True
        return run

    def bw_compiler(gm, example_inputs):
        return make_boxed_func(gm.forward)

    args = [t.detach().clone().requires_grad_() for t in inputs]
    aot_function(fn, fw_compiler, bw_compiler, partition_fn=partition_fn)(*args)
    kept = {a.untyped_storage().data_ptr() for a in args}
    sizes = {}
    for t in saved:
        if isinstance(t, torch.Tensor) and t.untyped_storage().data_ptr() not in kept:
            sizes[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
    return sum(sizes.values())


def eager_saved_bytes(fn, inputs):
    """Bytes of the activations eager autograd saves for the backward of ``fn(*inputs)``.

    ``saved_tensors_hooks`` sees every tensor an autograd node saves; distinct storages
    are counted once, storages of the inputs not at all.
    """
    args = [t.detach().clone().requires_grad_() for t in inputs]
    sizes = {}

    def pack(t):
        sizes[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = fn(*args)
    for a in args:
        sizes.pop(a.untyped_storage().data_ptr(), None)
    del loss
    return sum(sizes.values())


def recompute_partition(joint_module, joint_inputs, *, num_fwd_outputs, **kwargs):
    """Recompute cheap forward values (pointwise ops and views) in the backward.

    A backward node is one that depends on a ``tangents_*`` input; the others are
    forward nodes. Every backward use of a cheap forward node is redirected to a copy
    of it placed just before that use, recursively down to the values that must be
    saved (matmul outputs, reductions, inputs); then the default partitioner splits the
    graph and saves only what the copies read.
    """
    graph = joint_module.graph
    backward = set()
    for node in graph.nodes:
        if (node.op == "placeholder" and node.name.startswith("tangents")) or \
                any(a in backward for a in node.all_input_nodes):
            backward.add(node)
    forward = {n for n in graph.nodes if n not in backward and n.op not in ("placeholder", "output")}

    def cheap(node):
        return (node.op == "call_function" and isinstance(node.target, torch._ops.OpOverload)
                and (torch.Tag.pointwise in node.target.tags or node.target.is_view)
                and torch.Tag.nondeterministic_seeded not in node.target.tags)

    copies = {}

    def recomputed(node, before):
        if node not in forward or not cheap(node):
            return node
        if node not in copies:
            args = torch.fx.map_arg(node.args, lambda a: recomputed(a, before))
            kwargs_ = torch.fx.map_arg(node.kwargs, lambda a: recomputed(a, before))
            with graph.inserting_before(before):
                copy = graph.call_function(node.target, args, kwargs_)
            copy.meta = {k: v for k, v in node.meta.items() if k != "partitioner_tag"}
            copies[node] = copy
        return copies[node]

    for node in list(graph.nodes):
        if node not in backward or node.op in ("placeholder", "output"):
            continue
        node.args = torch.fx.map_arg(node.args, lambda a: recomputed(a, node))
        node.kwargs = torch.fx.map_arg(node.kwargs, lambda a: recomputed(a, node))
    graph.lint()
    joint_module.recompile()
    return default_partition(joint_module, joint_inputs, num_fwd_outputs=num_fwd_outputs, **kwargs)


def min_save_set(problem):
    """The cheapest values to save so the backward can recompute every needed value.

    Minimum s-t cut with each value split into ``v_in -> v_out`` (capacity: its bytes;
    cutting it means saving it): expensive values hang off the source (never
    recomputed), needed values feed the sink (the backward must have them).
    """
    g = nx.DiGraph()
    for name, nbytes in problem["nodes"].items():
        g.add_edge(f"{name}_in", f"{name}_out", capacity=0 if name in problem["inputs"] else nbytes)
    for source, target in problem["edges"]:
        g.add_edge(f"{source}_out", f"{target}_in", capacity=float("inf"))
    for name in problem["expensive"]:
        g.add_edge("source", f"{name}_in", capacity=float("inf"))
    for name in problem["inputs"]:
        g.add_edge("source", f"{name}_in", capacity=float("inf"))
    for name in problem["needed"]:
        g.add_edge(f"{name}_out", "sink", capacity=float("inf"))
    _, (reachable, _) = nx.minimum_cut(g, "source", "sink")
    return sorted(name for name in problem["nodes"]
                  if name not in problem["inputs"] and f"{name}_in" in reachable and f"{name}_out" not in reachable)


def decomposition_table():
    """A decomposition table that lowers the activations to the small chip's ops (``ALLOWED_OPS``),
    right for every argument of the ATen ops it replaces (softplus's ``beta`` and
    ``threshold``, gelu's ``approximate``) and for inputs where ``exp`` overflows."""
    aten = torch.ops.aten

    def sigmoid(x):
        return torch.reciprocal(torch.exp(torch.neg(x)) + 1)  # exp(-x) = inf gives 0, not inf/inf

    def tanh(x):
        return 2 * sigmoid(2 * x) - 1

    def softplus(x, beta=1, threshold=20):
        scaled = x * beta
        return torch.where(scaled > threshold, x, torch.log(torch.exp(scaled) + 1) / beta)

    def gelu(x, approximate="none"):
        if approximate == "tanh":
            inner = 0.7978845608028654 * (x + 0.044715 * x * x * x)
            return 0.5 * x * (1 + tanh(inner))
        return 0.5 * x * (1 + torch.erf(x * 0.7071067811865476))

    table = get_decompositions([aten.silu, aten.mish])
    table.update({aten.sigmoid.default: sigmoid, aten.tanh.default: tanh,
                  aten.softplus.default: softplus, aten.gelu.default: gelu})
    return table
