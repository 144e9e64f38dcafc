"""Answers to chapter 06's exercises: plausible wrong ones, each with the belief it embodies
(the checks must reject each one), and right ones written differently from the reference
(every case must accept them).

Self-contained (no import of the references): tests paste this module into notebooks
that are graded in the sandbox, where the solutions are hidden.
"""
import itertools

import networkx as nx
import torch
import torch._functorch.config as functorch_config
from functorch.compile import aot_function, default_partition, make_boxed_func, min_cut_rematerialization_partition
from torch._decomp import core_aten_decompositions, get_decompositions

from course_models.ch06_models import recomputable, save_cost
from graphviews.aot import tangent_dependent

aten = torch.ops.aten


# --- 06.saved_activations --------------------------------------------------------------

def _forward_saved(fn, inputs, partition_fn):
    """The leaves ``fn`` ran on and the forward graph's outputs after the loss."""
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
    return args, [t for t in saved if isinstance(t, torch.Tensor)]


def _storage_bytes(tensors, skip=()):
    """Bytes of the distinct storages of ``tensors``, without the storages of ``skip``."""
    skipped = {t.untyped_storage().data_ptr() for t in skip}
    sizes = {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes() for t in tensors}
    return sum(n for ptr, n in sizes.items() if ptr not in skipped)


def aot_saved_bytes_every_output(fn, inputs, partition_fn):
    _, saved = _forward_saved(fn, inputs, partition_fn)
    return sum(t.nbytes for t in saved)


def aot_saved_bytes_from_backward_inputs(fn, inputs, partition_fn):
    total = 0

    def bw_compiler(gm, example_inputs):
        nonlocal total
        for node in gm.graph.nodes:
            value = node.meta.get("val")
            if node.op == "placeholder" and not node.name.startswith("tangents") and isinstance(value, torch.Tensor):
                total += value.numel() * value.element_size()
        return make_boxed_func(gm.forward)

    args = [t.detach().clone().requires_grad_() for t in inputs]
    compiled = aot_function(fn, lambda gm, ex: make_boxed_func(gm.forward), bw_compiler, partition_fn=partition_fn)
    compiled(*args).backward()
    return total


def aot_saved_bytes_skipping_inputs_by_identity(fn, inputs, partition_fn):
    args, saved = _forward_saved(fn, inputs, partition_fn)
    return _storage_bytes([t for t in saved if not any(t is a for a in args)])


def aot_saved_bytes_of_tensor_elements(fn, inputs, partition_fn):
    args, saved = _forward_saved(fn, inputs, partition_fn)
    inputs_storage = {a.untyped_storage().data_ptr() for a in args}
    sizes = {t.untyped_storage().data_ptr(): t.nbytes for t in saved}
    return sum(n for ptr, n in sizes.items() if ptr not in inputs_storage)


def aot_saved_bytes_counting_aliases(fn, inputs, partition_fn):
    args, saved = _forward_saved(fn, inputs, partition_fn)
    inputs_storage = {a.untyped_storage().data_ptr() for a in args}
    return sum(t.untyped_storage().nbytes() for t in saved if t.untyped_storage().data_ptr() not in inputs_storage)


def aot_saved_bytes_with_default_partition(fn, inputs, partition_fn):
    args, saved = _forward_saved(fn, inputs, default_partition)
    return _storage_bytes(saved, skip=args)


def aot_saved_bytes_via_saved_tensors_hooks(fn, inputs, partition_fn):
    packed = []

    def pack(t):
        packed.append(t)
        return t

    args = [t.detach().clone().requires_grad_() for t in inputs]
    compiled = aot_function(fn, lambda gm, ex: make_boxed_func(gm.forward), lambda gm, ex: make_boxed_func(gm.forward),
                            partition_fn=partition_fn)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        compiled(*args)
    return _storage_bytes(packed, skip=args)


def aot_saved_bytes_from_boxed_arguments(fn, inputs, partition_fn):
    storages, primals = {}, set()

    def fw_compiler(gm, example_inputs):
        def run(*args):
            primals.update(a.untyped_storage().data_ptr() for a in args)
            outs = gm(*args)
            for t in outs[1:]:
                storages[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
            return outs
        return make_boxed_func(run)

    leaves = [t.detach().clone().requires_grad_() for t in inputs]
    aot_function(fn, fw_compiler, lambda gm, ex: make_boxed_func(gm.forward), partition_fn=partition_fn)(*leaves)
    return sum(nbytes for ptr, nbytes in storages.items() if ptr not in primals)


# --- 06.eager_saved --------------------------------------------------------------------

def _packed(fn, inputs, requires_grad=True):
    """The leaves ``fn`` ran on and every tensor autograd packed while it ran."""
    packed = []

    def pack(t):
        packed.append(t)
        return t

    args = [t.detach().clone().requires_grad_(requires_grad) for t in inputs]
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        fn(*args)
    return args, packed


def eager_saved_bytes_every_pack(fn, inputs):
    _, packed = _packed(fn, inputs)
    return sum(t.nbytes for t in packed)


def eager_saved_bytes_counting_inputs(fn, inputs):
    _, packed = _packed(fn, inputs)
    return _storage_bytes(packed)


def eager_saved_bytes_skipping_inputs_by_identity(fn, inputs):
    args, packed = _packed(fn, inputs)
    return _storage_bytes([t for t in packed if not any(t is a for a in args)])


def eager_saved_bytes_of_tensor_elements(fn, inputs):
    args, packed = _packed(fn, inputs)
    inputs_storage = {a.untyped_storage().data_ptr() for a in args}
    sizes = {t.untyped_storage().data_ptr(): t.nbytes for t in packed}
    return sum(n for ptr, n in sizes.items() if ptr not in inputs_storage)


def eager_saved_bytes_of_plain_inputs(fn, inputs):
    args, packed = _packed(fn, inputs, requires_grad=False)
    return _storage_bytes(packed, skip=args)


def eager_saved_bytes_from_grad_fn(fn, inputs):
    args = [t.detach().clone().requires_grad_() for t in inputs]
    loss = fn(*args)
    saved, seen, stack = [], set(), [loss.grad_fn]
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        for name in dir(node):
            if name.startswith("_saved_") and isinstance(value := getattr(node, name), torch.Tensor):
                saved.append(value)
        stack.extend(next_node for next_node, _ in node.next_functions)
    return _storage_bytes(saved, skip=args)


class _SavedStorages(torch.autograd.graph.saved_tensors_hooks):
    """Records the storage of every tensor autograd saves while the context is open."""

    def __init__(self):
        self.storages = {}
        super().__init__(self._pack, lambda t: t)

    def _pack(self, t):
        self.storages[t.untyped_storage().data_ptr()] = t.untyped_storage()
        return t


def eager_saved_bytes_storages_after_the_run(fn, inputs):
    args = [t.detach().clone().requires_grad_() for t in inputs]
    recorder = _SavedStorages()
    with recorder:
        loss = fn(*args)
    kept = recorder.storages.keys() - {a.untyped_storage().data_ptr() for a in args}
    del loss
    return sum(recorder.storages[ptr].nbytes() for ptr in kept)


def eager_saved_bytes_by_base_tensor(fn, inputs):
    args, packed = _packed(fn, inputs)
    bases = {}
    for t in packed:
        base = t if t._base is None else t._base
        bases[base.data_ptr()] = base
    for a in args:
        bases.pop(a.data_ptr(), None)
    return sum(base.nbytes for base in bases.values())


# --- 06.recompute_partition ------------------------------------------------------------

def _backward_nodes(graph):
    backward = set()
    for node in graph.nodes:
        if (node.op == "placeholder" and node.name.startswith("tangents")) or \
                any(a in backward for a in node.all_input_nodes):
            backward.add(node)
    return backward


def _is_cheap(node):
    return (node.op == "call_function" and isinstance(node.target, torch._ops.OpOverload)
            and (torch.Tag.pointwise in node.target.tags or node.target.is_view))


def _meta_without_tag(node):
    return {k: v for k, v in node.meta.items() if k != "partitioner_tag"}


def _recompute(joint_module, joint_inputs, num_fwd_outputs, kwargs, *, cheap=_is_cheap, backward=None,
               recurse=True, meta=_meta_without_tag):
    """The reference's way with its choices as parameters, each wrong answer turning one."""
    graph = joint_module.graph
    backward = _backward_nodes(graph) if backward is None else backward
    forward = {n for n in graph.nodes if n not in backward and n.op not in ("placeholder", "output")}
    copies = {}

    def recomputed(node, before):
        if node not in forward or not cheap(node):
            return node
        if node not in copies:
            args, kw = node.args, node.kwargs
            if recurse:
                args = torch.fx.map_arg(args, lambda a: recomputed(a, before))
                kw = torch.fx.map_arg(kw, lambda a: recomputed(a, before))
            with graph.inserting_before(before):
                copies[node] = graph.call_function(node.target, args, kw)
            copies[node].meta = meta(node)
        return copies[node]

    for node in list(graph.nodes):
        if node in backward and node.op not in ("placeholder", "output"):
            node.args = torch.fx.map_arg(node.args, lambda a: recomputed(a, node))
            node.kwargs = torch.fx.map_arg(node.kwargs, lambda a: recomputed(a, node))
    graph.lint()
    joint_module.recompile()
    return default_partition(joint_module, joint_inputs, num_fwd_outputs=num_fwd_outputs, **kwargs)


def recompute_nothing(joint_module, joint_inputs, *, num_fwd_outputs, **kwargs):
    return default_partition(joint_module, joint_inputs, num_fwd_outputs=num_fwd_outputs, **kwargs)


def recompute_everything(joint_module, joint_inputs, *, num_fwd_outputs, **kwargs):
    return _recompute(joint_module, joint_inputs, num_fwd_outputs, kwargs, cheap=lambda n: n.op == "call_function")


def recompute_all_but_matmuls(joint_module, joint_inputs, *, num_fwd_outputs, **kwargs):
    return _recompute(joint_module, joint_inputs, num_fwd_outputs, kwargs,
                      cheap=lambda n: n.op == "call_function" and n.target is not aten.mm.default)


def recompute_pointwise_but_not_views(joint_module, joint_inputs, *, num_fwd_outputs, **kwargs):
    return _recompute(joint_module, joint_inputs, num_fwd_outputs, kwargs,
                      cheap=lambda n: _is_cheap(n) and torch.Tag.pointwise in n.target.tags)


def recompute_without_recursion(joint_module, joint_inputs, *, num_fwd_outputs, **kwargs):
    return _recompute(joint_module, joint_inputs, num_fwd_outputs, kwargs, recurse=False)


def recompute_copies_without_meta(joint_module, joint_inputs, *, num_fwd_outputs, **kwargs):
    return _recompute(joint_module, joint_inputs, num_fwd_outputs, kwargs, meta=lambda node: {})


def recompute_copies_with_the_whole_meta(joint_module, joint_inputs, *, num_fwd_outputs, **kwargs):
    return _recompute(joint_module, joint_inputs, num_fwd_outputs, kwargs, meta=lambda node: dict(node.meta))


def recompute_matmuls_too(joint_module, joint_inputs, *, num_fwd_outputs, **kwargs):
    return _recompute(joint_module, joint_inputs, num_fwd_outputs, kwargs,
                      cheap=lambda n: _is_cheap(n) or n.target is aten.mm.default)


def partition_with_min_cut(joint_module, joint_inputs, *, num_fwd_outputs, **kwargs):
    return min_cut_rematerialization_partition(joint_module, joint_inputs, num_fwd_outputs=num_fwd_outputs, **kwargs)


def min_cut_without_its_bans(joint_module, joint_inputs, **kwargs):
    with functorch_config.patch(ban_recompute_used_far_apart=False, ban_recompute_long_fusible_chains=False,
                                ban_recompute_materialized_backward=False):
        return min_cut_rematerialization_partition(joint_module, joint_inputs, **kwargs)


def recompute_a_copy_per_use(joint_module, joint_inputs, *, num_fwd_outputs, **kwargs):
    graph = joint_module.graph
    backward = tangent_dependent(graph)

    def recomputed(node, before):
        if node in backward or node.op != "call_function" or not _is_cheap(node):
            return node
        with graph.inserting_before(before):
            copy = graph.node_copy(node, lambda a: recomputed(a, before))
        copy.meta.pop("partitioner_tag", None)
        return copy

    for node in list(graph.nodes):
        if node in backward and node.op == "call_function":
            node.args = torch.fx.map_arg(node.args, lambda a: recomputed(a, node))
            node.kwargs = torch.fx.map_arg(node.kwargs, lambda a: recomputed(a, node))
    graph.lint()
    joint_module.recompile()
    return default_partition(joint_module, joint_inputs, num_fwd_outputs=num_fwd_outputs, **kwargs)


def recompute_by_partitioner_tag(joint_module, joint_inputs, *, num_fwd_outputs, **kwargs):
    backward = {n for n in joint_module.graph.nodes if n.meta.get("partitioner_tag") == "is_backward"}
    return _recompute(joint_module, joint_inputs, num_fwd_outputs, kwargs, backward=backward)


# --- 06.min_cut ----------------------------------------------------------------------

INF = float("inf")


def _split_graph(problem, *, capacity=None, tie=("expensive", "inputs"), sink_side="_out", graph=nx.DiGraph):
    """4.1's construction; ``capacity(name, nbytes)`` defaults to the bytes, 0 for inputs."""
    capacity = capacity or (lambda name, nbytes: 0 if name in problem["inputs"] else nbytes)
    g = graph()
    g.add_nodes_from(["source", "sink"])
    for name, nbytes in problem["nodes"].items():
        g.add_edge(f"{name}_in", f"{name}_out", capacity=capacity(name, nbytes))
    for producer, consumer in problem["edges"]:
        g.add_edge(f"{producer}_out", f"{consumer}_in", capacity=INF)
    for name in (n for kind in tie for n in problem[kind]):
        g.add_edge("source", f"{name}_in", capacity=INF)
    for name in problem["needed"]:
        g.add_edge(f"{name}{sink_side}", "sink", capacity=INF)
    return g


def _cut_values(problem, g):
    _, (reachable, _) = nx.minimum_cut(g, "source", "sink")
    return sorted(n for n in problem["nodes"]
                  if n not in problem["inputs"] and f"{n}_in" in reachable and f"{n}_out" not in reachable)


def save_what_backward_reads(problem):
    return list(problem["needed"])


def min_cut_ignoring_expensive(problem):
    return _cut_values(problem, _split_graph(problem, tie=("inputs",)))


def min_cut_on_edges_without_splitting(problem):
    g = nx.DiGraph()
    for producer, consumer in problem["edges"]:
        g.add_edge(producer, consumer, capacity=0 if producer in problem["inputs"] else problem["nodes"][producer])
    for name in problem["expensive"] + problem["inputs"]:
        g.add_edge("source", name, capacity=INF)
    for name in problem["needed"]:
        g.add_edge(name, "sink", capacity=problem["nodes"][name])
    _, (reachable, unreachable) = nx.minimum_cut(g, "source", "sink")
    saved = {p for p, c in problem["edges"] if p in reachable and c in unreachable}
    saved |= {n for n in problem["needed"] if n in reachable}
    return sorted(saved - set(problem["inputs"]))


def min_cut_with_bytes_per_use(problem):
    g = nx.DiGraph()
    for producer, consumer in problem["edges"]:
        g.add_edge(producer, consumer, capacity=0 if producer in problem["inputs"] else problem["nodes"][producer])
    for name in problem["expensive"] + problem["inputs"]:
        g.add_edge("source", name, capacity=INF)
    for name in problem["needed"]:
        g.add_edge(name, "sink", capacity=INF)
    _, (reachable, unreachable) = nx.minimum_cut(g, "source", "sink")
    return sorted({p for p, c in problem["edges"] if p in reachable and c in unreachable} - set(problem["inputs"]))


def min_cut_keeping_the_sink_side(problem):
    _, (_, unreachable) = nx.minimum_cut(_split_graph(problem), "source", "sink")
    return sorted(n for n in problem["nodes"] if n not in problem["inputs"] and f"{n}_in" in unreachable)


def min_cut_with_input_bytes(problem):
    return _cut_values(problem, _split_graph(problem, capacity=lambda name, nbytes: nbytes))


def min_cut_counting_values(problem):
    def one_per_value(name, nbytes):
        return 0 if name in problem["inputs"] else 1
    return _cut_values(problem, _split_graph(problem, capacity=one_per_value))


def min_cut_sink_from_in(problem):
    return _cut_values(problem, _split_graph(problem, sink_side="_in"))


def min_cut_undirected(problem):
    return _cut_values(problem, _split_graph(problem, graph=nx.Graph))


def save_the_matmuls(problem):
    producers = {}
    for producer, consumer in problem["edges"]:
        producers.setdefault(consumer, []).append(producer)
    saved, seen, stack = set(), set(), list(problem["needed"])
    while stack:
        name = stack.pop()
        if name in seen or name in problem["inputs"]:
            continue
        seen.add(name)
        if name in problem["expensive"]:
            saved.add(name)
        else:
            stack.extend(producers.get(name, []))
    return sorted(saved)


def min_cut_tying_only_the_expensive(problem):
    return _cut_values(problem, _split_graph(problem, tie=("expensive",)))


def min_save_set_listing_inputs(problem):
    _, (reachable, _) = nx.minimum_cut(_split_graph(problem), "source", "sink")
    return [n for n in problem["nodes"] if f"{n}_in" in reachable and f"{n}_out" not in reachable]


def min_save_set_by_enumeration(problem):
    candidates = [n for n in problem["nodes"] if n not in problem["inputs"]]
    subsets = (c for size in range(len(candidates) + 1) for c in itertools.combinations(candidates, size))
    return list(min((c for c in subsets if recomputable(problem, c)), key=lambda c: save_cost(problem, c)))


# --- 06.decompositions ---------------------------------------------------------------

def _sigmoid(x):
    return torch.reciprocal(torch.exp(torch.neg(x)) + 1)


def _tanh(x):
    return 2 * _sigmoid(2 * x) - 1


def _softplus(x, beta=1, threshold=20):
    scaled = x * beta
    return torch.where(scaled > threshold, x, torch.log(torch.exp(scaled) + 1) / beta)


def _gelu_tanh(x):
    return 0.5 * x * (1 + _tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))


def _gelu_exact(x):
    return 0.5 * x * (1 + torch.erf(x * 0.7071067811865476))


def _gelu(x, approximate="none"):
    return _gelu_tanh(x) if approximate == "tanh" else _gelu_exact(x)


def _table(**replaced):
    """A right table, but with the functions in ``replaced`` (by op name) swapped in."""
    functions = {"sigmoid": _sigmoid, "tanh": _tanh, "softplus": _softplus, "gelu": _gelu, **replaced}
    table = get_decompositions([aten.silu, aten.mish])
    table.update({getattr(aten, name).default: function for name, function in functions.items()})
    return table


def core_aten_table():
    return core_aten_decompositions()


def pytorch_decompositions_only():
    return get_decompositions([aten.silu, aten.mish, aten.softplus, aten.gelu, aten.sigmoid, aten.tanh])


def table_keyed_by_packets():
    return {getattr(aten, name): function
            for name, function in {"sigmoid": _sigmoid, "tanh": _tanh, "softplus": _softplus, "gelu": _gelu,
                                   "silu": lambda x: x * _sigmoid(x),
                                   "mish": lambda x: x * _tanh(_softplus(x))}.items()}


def softplus_without_threshold():
    return _table(softplus=lambda x, beta=1, threshold=20: torch.log(torch.exp(x * beta) + 1) / beta)


def softplus_without_beta():
    return _table(softplus=lambda x, beta=1, threshold=20: torch.where(x > threshold, x, torch.log(torch.exp(x) + 1)))


def softplus_switching_at_the_threshold():
    return _table(softplus=lambda x, beta=1, threshold=20: torch.where(
        x * beta >= threshold, x, torch.log(torch.exp(x * beta) + 1) / beta))


def gelu_ignoring_approximate():
    return _table(gelu=lambda x, approximate="none": _gelu_tanh(x))


def gelu_always_exact():
    return _table(gelu=lambda x, approximate="none": _gelu_exact(x))


def textbook_tanh():
    return _table(tanh=lambda x: (torch.exp(x) - torch.exp(-x)) / (torch.exp(x) + torch.exp(-x)))


def decompositions_by_hand():
    def sigmoid(x):
        return 1 / (1 + torch.exp(-x))

    def tanh(x):
        return 2 / (1 + torch.exp(-2 * x)) - 1

    def softplus(x, beta=1.0, threshold=20.0):
        return torch.where(x * beta <= threshold, torch.log(1 + torch.exp(x * beta)) / beta, x)

    def gelu(x, approximate="none"):
        if approximate == "none":
            return x * (torch.erf(x / 2 ** 0.5) + 1) / 2
        return x * (tanh((2 / torch.pi) ** 0.5 * (x + 0.044715 * x * x * x)) + 1) / 2

    return {aten.sigmoid.default: sigmoid, aten.tanh.default: tanh, aten.softplus.default: softplus,
            aten.gelu.default: gelu, aten.silu.default: lambda x: x * sigmoid(x),
            aten.mish.default: lambda x: x * tanh(softplus(x))}


def softplus_in_log_sum_exp_form():
    def softplus(x, beta=1, threshold=20):
        scaled = x * beta
        magnitude = torch.where(scaled > 0, scaled, -scaled)
        stable = (torch.where(scaled > 0, scaled, scaled * 0) + torch.log(torch.exp(-magnitude) + 1)) / beta
        return torch.where(scaled > threshold, x, stable)
    return _table(softplus=softplus)


WRONG_ANSWERS = [  # (exercise id, function, the misconception)
    ("06.saved_activations", aot_saved_bytes_every_output,
     "every tensor the forward returns after the loss is new memory: inputs and detach aliases count too"),
    ("06.saved_activations", aot_saved_bytes_from_backward_inputs,
     "the backward graph's non-tangent placeholders, sized from their metadata, are the saved activations"),
    ("06.saved_activations", aot_saved_bytes_skipping_inputs_by_identity,
     "a saved input is the input tensor itself, so `t is a` finds it (a transposed weight is a view, not the input)"),
    ("06.saved_activations", aot_saved_bytes_of_tensor_elements,
     "a saved view costs its own elements (t.nbytes), not the storage it keeps alive"),
    ("06.saved_activations", aot_saved_bytes_counting_aliases,
     "a detach alias is one more saved tensor, so every output's storage is added up"),
    ("06.saved_activations", aot_saved_bytes_with_default_partition,
     "aot_function partitions the same way whatever partition_fn is given, so it can be left out"),
    ("06.eager_saved", eager_saved_bytes_every_pack,
     "every pack call is new memory: saved inputs and tensors saved twice count each time"),
    ("06.eager_saved", eager_saved_bytes_counting_inputs,
     "an input that autograd saves (mm saves x and w) costs its bytes again"),
    ("06.eager_saved", eager_saved_bytes_skipping_inputs_by_identity,
     "pack receives the input tensors themselves, so `t is a` removes them (F.linear saves w.t(), a view)"),
    ("06.eager_saved", eager_saved_bytes_of_tensor_elements,
     "a saved view (half of a chunked matmul output) costs only its own elements"),
    ("06.eager_saved", eager_saved_bytes_of_plain_inputs,
     "autograd saves tensors for the backward even when no input requires grad"),
    ("06.eager_saved", eager_saved_bytes_from_grad_fn,
     "grad_fn's _saved_* attributes hold what pack sees (they also hold Python numbers wrapped as 0-dim tensors)"),
    ("06.recompute_partition", recompute_nothing,
     "the default partitioner already recomputes what is cheap"),
    ("06.recompute_partition", recompute_everything,
     "recompute every forward value the backward reads, matmuls included: less memory is always better"),
    ("06.recompute_partition", recompute_all_but_matmuls,
     "only matmuls are expensive; everything else (softmax included) is cheap to recompute"),
    ("06.recompute_partition", recompute_pointwise_but_not_views,
     "only pointwise ops are cheap; views (t, detach) are left to the default partitioner"),
    ("06.recompute_partition", recompute_without_recursion,
     "copying the cheap value the backward reads is enough; its own inputs can come from the forward"),
    ("06.recompute_partition", recompute_copies_without_meta,
     "a copy needs only target and arguments; the node's meta is for printing"),
    ("06.recompute_partition", recompute_copies_with_the_whole_meta,
     "a copy takes the node's meta whole: partitioner_tag is a label for printing, not what default_partition reads"),
    ("06.recompute_partition", recompute_matmuls_too,
     "a small matmul costs one launch on the chip like a pointwise op, so it is cheap to recompute on any chip"),
    ("06.recompute_partition", partition_with_min_cut,
     "min_cut_rematerialization_partition already recomputes every value that is cheap on the chip"),
    ("06.min_cut", save_what_backward_reads,
     "the default partitioner's choice: save every needed value, recompute nothing"),
    ("06.min_cut", min_cut_ignoring_expensive,
     "only the inputs hang off the source; matmuls may be recomputed like anything else"),
    ("06.min_cut", min_cut_on_edges_without_splitting,
     "no node splitting: a value's bytes sit on its edges (to consumers, to the sink), so a cut counts them per edge"),
    ("06.min_cut", min_cut_with_bytes_per_use,
     "no node splitting: cutting every edge out of a value saves it, each edge costing the value's bytes"),
    ("06.min_cut", min_cut_keeping_the_sink_side,
     "the values on the sink side ('the backward can get them') are the ones to save"),
    ("06.min_cut", min_cut_with_input_bytes,
     "an input's in->out edge carries its bytes like any value's: keeping an input costs memory"),
    ("06.min_cut", min_cut_counting_values,
     "the fewest saved values is the cheapest: every split edge gets capacity 1"),
    ("06.min_cut", min_cut_sink_from_in,
     "a needed value reaches the sink from its _in half, so saving it is not among the cuts"),
    ("06.min_cut", min_cut_undirected,
     "a cut does not care about direction: an undirected nx.Graph works as well"),
    ("06.min_cut", save_the_matmuls,
     "saving only the matmuls and recomputing every cheap value is always the cheapest"),
    ("06.decompositions", core_aten_table,
     "PyTorch's core ATen decompositions lower everything: sigmoid and tanh are core ops, kept as they are"),
    ("06.decompositions", pytorch_decompositions_only,
     "PyTorch's own decomposition of each activation is enough: they lower to ops outside the chip's set"),
    ("06.decompositions", table_keyed_by_packets,
     "a decomposition table is keyed by the op (aten.sigmoid), not by its overload (aten.sigmoid.default)"),
    ("06.decompositions", softplus_without_threshold,
     "softplus is log(1 + exp(beta*x))/beta; threshold is only an optimisation"),
    ("06.decompositions", softplus_without_beta,
     "beta only matters through the threshold test; the formula itself is log(1 + exp(x))"),
    ("06.decompositions", softplus_switching_at_the_threshold,
     "softplus switches to x once beta*x reaches the threshold (>=, where PyTorch uses >)"),
    ("06.decompositions", gelu_ignoring_approximate,
     "gelu is the tanh formula; approximate only says how exact the caller wants it"),
    ("06.decompositions", gelu_always_exact,
     "the erf formula is GELU, and approximate='tanh' wants the same values"),
    ("06.decompositions", textbook_tanh,
     "tanh(x) = (e^x - e^-x)/(e^x + e^-x) works for every float32 x"),
]

RIGHT_ANSWERS = [  # (exercise id, function, how it differs from the reference)
    ("06.saved_activations", aot_saved_bytes_via_saved_tensors_hooks,
     "saved_tensors_hooks around the compiled call see what CompiledFunction saves for the backward"),
    ("06.saved_activations", aot_saved_bytes_from_boxed_arguments,
     "make_boxed_func around an unboxed function; input storages taken from the forward's own arguments"),
    ("06.eager_saved", eager_saved_bytes_by_base_tensor,
     "autograd's view tracking: a saved view counts its ._base tensor, deduplicated by the base's address"),
    ("06.eager_saved", eager_saved_bytes_storages_after_the_run,
     "keeps the storages by address and removes the inputs' with a set difference after the run"),
    ("06.recompute_partition", recompute_a_copy_per_use,
     "graphviews' tangent_dependent, graph.node_copy, and a fresh copy for every use (no memo)"),
    ("06.recompute_partition", recompute_by_partitioner_tag,
     "backward nodes read from meta['partitioner_tag'] == 'is_backward'"),
    ("06.recompute_partition", min_cut_without_its_bans,
     "no graph surgery: min_cut_rematerialization_partition with its used-far-apart, long-fusible-chain and "
     "materialized-in-backward bans switched off in torch._functorch.config"),
    ("06.min_cut", min_cut_tying_only_the_expensive,
     "inputs are not tied to the source: they are never recomputed, so they need no tie"),
    ("06.min_cut", min_save_set_listing_inputs,
     "returns every cut value, inputs included (inputs cost nothing)"),
    ("06.min_cut", min_save_set_by_enumeration,
     "no networkx: enumerates subsets with the chapter's recomputable and save_cost"),
    ("06.decompositions", decompositions_by_hand,
     "every activation written by hand (silu and mish too), with / and <= where the reference uses reciprocal and >"),
    ("06.decompositions", softplus_in_log_sum_exp_form,
     "softplus in the overflow-free form max(s, 0) + log(1 + exp(-|s|)), built from where"),
]

