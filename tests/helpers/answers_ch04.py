"""Plausible wrong answers to chapter 04's exercises, each with the belief it embodies; the checks must reject each one.
Correct answers written differently from the references, which every case must accept.

Self-contained (no import of the references): tests paste this module into notebooks
that are graded in the sandbox, where the solutions are hidden.
"""
import dataclasses
import hashlib

import torch
import torch._lazy
import torch._lazy.computation
import torch._lazy.metrics
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map

import toychip


# --- 04.lazy_recorder --------------------------------------------------------------------

class _Recorder(TorchDispatchMode):
    """Every ATen call as (func, args, kwargs, output): the recording all answers share."""

    def __init__(self):
        super().__init__()
        self.nodes = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        self.nodes.append((func, args, kwargs or {}, out))
        return out


def _record_on_meta(fn, inputs):
    """(meta inputs, recorded nodes, fn's meta result)."""
    metas = [x.to("meta") for x in inputs]
    recorder = _Recorder()
    with recorder:
        result = fn(*metas)
    return metas, recorder.nodes, result


def _tensors(value) -> list:
    return [t for t in tree_flatten(value)[0] if isinstance(t, torch.Tensor)]


def _producers(nodes) -> dict:
    """id of every recorded output tensor -> the index of the node that made it."""
    return {id(t): i for i, node in enumerate(nodes) for t in _tensors(node[3])}


def _replay(nodes, indices, metas, inputs) -> dict:
    """Run nodes ``indices`` (in order) on real tensors; id of each meta tensor -> its value."""
    values = {id(m): x for m, x in zip(metas, inputs)}
    for i in indices:
        func, args, kwargs, out = nodes[i]
        real = tree_map(lambda v: values[id(v)] if isinstance(v, torch.Tensor) else v, (args, kwargs))
        for meta, value in zip(_tensors(out), _tensors(func(*real[0], **real[1]))):
            values[id(meta)] = value
    return values


def _live_from(nodes, roots, inputs_of) -> list:
    """Indices reachable backwards from node indices ``roots``, following ``inputs_of(node)``."""
    producer = _producers(nodes)
    live, stack = set(), list(roots)
    while stack:
        i = stack.pop()
        if i not in live:
            live.add(i)
            stack += [producer[id(t)] for t in inputs_of(nodes[i]) if id(t) in producer]
    return sorted(live)


def lazy_run_eagerly(fn, inputs):
    """Seed 000's picture of eager mode: just run it -- dead ops run too."""
    return fn(*inputs)


def lazy_run_everything_recorded(fn, inputs):
    """Records on meta tensors, but then runs every recorded op (no dead-code removal)."""
    metas, nodes, result = _record_on_meta(fn, inputs)
    return _replay(nodes, range(len(nodes)), metas, inputs)[id(result)]


def lazy_run_one_pass_dce(fn, inputs):
    """Drops only the nodes whose output nobody reads, in one pass (no propagation)."""
    metas, nodes, result = _record_on_meta(fn, inputs)
    read = {id(t) for _, args, kwargs, _ in nodes for t in _tensors((args, kwargs))} | {id(result)}
    kept = [i for i, node in enumerate(nodes) if any(id(t) in read for t in _tensors(node[3]))]
    return _replay(nodes, kept, metas, inputs)[id(result)]


def lazy_run_top_level_args(fn, inputs):
    """Walks back only through arguments that are tensors themselves, not tensors inside a list."""
    metas, nodes, result = _record_on_meta(fn, inputs)
    direct = lambda node: [a for a in list(node[1]) + list(node[2].values()) if isinstance(a, torch.Tensor)]
    live = _live_from(nodes, [_producers(nodes)[id(result)]], direct)
    return _replay(nodes, live, metas, inputs)[id(result)]


def lazy_run_without_kwargs(fn, inputs):
    """Replays ``func(*args)``: keyword arguments such as ``alpha=`` taken for options of no effect."""
    metas, nodes, result = _record_on_meta(fn, inputs)
    live = _live_from(nodes, [_producers(nodes)[id(result)]], lambda node: _tensors(node[1]))
    stripped = [(func, args, {}, out) for func, args, _, out in nodes]
    return _replay(stripped, live, metas, inputs)[id(result)]


def lazy_run_from_last_node(fn, inputs):
    """Takes the last recorded op for fn's output, and walks back from it."""
    metas, nodes, result = _record_on_meta(fn, inputs)
    live = _live_from(nodes, [len(nodes) - 1], lambda node: _tensors((node[1], node[2])))
    values = _replay(nodes, live, metas, inputs)
    last = [values[id(t)] for t in _tensors(nodes[-1][3])]
    return last[0] if len(last) == 1 else tuple(last)


def lazy_run_single_output_ops(fn, inputs):
    """Every op returns one tensor: nodes are keyed by ``id(out)``, so a (values, indices) pair is no producer."""
    metas, nodes, result = _record_on_meta(fn, inputs)
    producer = {id(out): i for i, (_, _, _, out) in enumerate(nodes)}
    live, stack = set(), [producer[id(result)]]
    while stack:
        i = stack.pop()
        if i not in live:
            live.add(i)
            stack += [producer[id(t)] for t in _tensors((nodes[i][1], nodes[i][2])) if id(t) in producer]
    values = {id(m): x for m, x in zip(metas, inputs)}
    for i in sorted(live):
        func, args, kwargs, out = nodes[i]
        real = tree_map(lambda v: values[id(v)] if isinstance(v, torch.Tensor) else v, (args, kwargs))
        values[id(out)] = func(*real[0], **real[1])
    return values[id(result)]


def lazy_run_on_demand(fn, inputs):
    """Demand-driven: evaluate the output recursively, each node at most once (memoised)."""
    metas, nodes, result = _record_on_meta(fn, inputs)
    made_by = {id(t): (i, k) for i, node in enumerate(nodes) for k, t in enumerate(_tensors(node[3]))}
    known = {id(m): x for m, x in zip(metas, inputs)}
    computed = {}

    def value(t):
        if id(t) in known:
            return known[id(t)]
        i, k = made_by[id(t)]
        if i not in computed:
            func, args, kwargs, _ = nodes[i]
            real = tree_map(lambda v: value(v) if isinstance(v, torch.Tensor) else v, (args, kwargs))
            computed[i] = _tensors(func(*real[0], **real[1]))
        return computed[i][k]

    return value(result)


def lazy_run_backward_sweep(fn, inputs):
    """One backward liveness sweep over the record (a set of needed tensor ids), then one forward pass."""
    metas, nodes, result = _record_on_meta(fn, inputs)
    needed, live = {id(result)}, []
    for i in reversed(range(len(nodes))):
        _, args, kwargs, out = nodes[i]
        if any(id(t) in needed for t in _tensors(out)):
            live.append(i)
            needed |= {id(t) for t in _tensors((args, kwargs))}
    return _replay(nodes, reversed(live), metas, inputs)[id(result)]


class _TensorId:
    """A tensor's ``id()`` standing in for the tensor in a record (a pytree leaf)."""

    def __init__(self, tensor):
        self.id = id(tensor)


def lazy_run_keeping_only_ids(fn, inputs):
    """Keeps only the ``id()``s of the meta tensors, not the tensors: a freed temporary's id is
    taken by a later tensor, and the walk back follows the wrong producer."""
    nodes = []

    class IdRecorder(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            ids = tree_map(lambda v: _TensorId(v) if isinstance(v, torch.Tensor) else v, (args, kwargs))
            nodes.append((func, ids, [id(t) for t in _tensors(out)]))
            return out

    metas = [x.to("meta") for x in inputs]
    with IdRecorder():
        result_id = id(fn(*metas))
    producer = {o: i for i, (_, _, outs) in enumerate(nodes) for o in outs}
    reads = lambda i: [r.id for r in tree_flatten(nodes[i][1])[0] if isinstance(r, _TensorId)]
    live, stack = set(), [producer[result_id]]
    while stack:
        i = stack.pop()
        if i not in live:
            live.add(i)
            stack += [producer[r] for r in reads(i) if r in producer]
    values = {id(m): x for m, x in zip(metas, inputs)}
    for i in sorted(live):
        func, ids, outs = nodes[i]
        args, kwargs = tree_map(lambda v: values[v.id] if isinstance(v, _TensorId) else v, ids)
        values.update(zip(outs, _tensors(func(*args, **kwargs))))
    return values[result_id]


def lazy_run_value_numbers(fn, inputs):
    """Numbers every tensor it sees (keeping the meta tensors alive in that list), records
    nodes over value numbers, and walks back breadth-first."""
    seen, number, ops = [], {}, []

    def number_of(t):
        if id(t) not in number:
            number[id(t)] = len(seen)
            seen.append(t)
        return number[id(t)]

    class Numbering(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            reads = [number_of(t) for t in _tensors((args, kwargs))]
            ops.append((func, args, kwargs, reads, [number_of(t) for t in _tensors(out)]))
            return out

    metas = [x.to("meta") for x in inputs]
    env = {number_of(m): x for m, x in zip(metas, inputs)}
    with Numbering():
        result = fn(*metas)
    made_by = {v: k for k, op in enumerate(ops) for v in op[4]}
    needed, queue = set(), [number[id(result)]]
    while queue:
        k = made_by.get(queue.pop(0))
        if k is not None and k not in needed:
            needed.add(k)
            queue += ops[k][3]
    for k in sorted(needed):
        func, args, kwargs, _, outs = ops[k]
        real = tree_map(lambda v: env[number[id(v)]] if isinstance(v, torch.Tensor) else v, (args, kwargs))
        env.update(zip(outs, _tensors(func(*real[0], **real[1]))))
    return env[number[id(result)]]


# --- 04.fusion_policy ----------------------------------------------------------------------

def _group_matmuls(nodes, producer, group):
    """The rule: how many matmuls ``producer``'s whole group holds."""
    return sum(nodes[i].kind == "matmul" for i in group)


def _fuse_greedily(nodes, may_join, matmul_opens_group=True, max_matmuls=1, matmuls_of=_group_matmuls):
    """The exercise's greedy scan, with the rules that a wrong answer misreads as parameters:
    ``may_join(producer, node, group_of)`` says whether ``producer``'s group may join ``node``'s,
    ``matmuls_of(nodes, producer, group)`` how many matmuls joining that group adds."""
    group_of = {}
    for node in nodes:
        if node.kind == "matmul" and matmul_opens_group:
            group_of[node.index] = [node.index]
        if node.kind != "pointwise":
            continue
        group, matmuls = [node.index], 0
        for p in dict.fromkeys(node.inputs):
            if not may_join(nodes[p], node, group_of):
                continue
            other = group_of.get(p, [p])
            other_matmuls = matmuls_of(nodes, nodes[p], other)
            if max_matmuls is not None and matmuls + other_matmuls > max_matmuls:
                continue
            matmuls += other_matmuls
            group = other + group
        for i in group:
            group_of[i] = group
    return [sorted(g) for g in {id(g): g for g in group_of.values()}.values() if len(g) > 1]


def _only_user(producer, node, group_of):
    """The exercise's rule: the producer is in a group, ``node`` is its only user, and it is no output."""
    return producer.index in group_of and producer.users == (node.index,) and not producer.is_output


def no_fusion(nodes):
    """An empty policy leaves fusion to the built-in scheduler (it does not: every op is its own kernel)."""
    return []


def fuse_chains_ignoring_users(nodes):
    """Joins connected pointwise ops even when an intermediate value is used elsewhere."""
    group_of = {}
    for node in nodes:
        if node.kind != "pointwise":
            continue
        group = [node.index]
        for p in node.inputs:
            if p in group_of and group_of[p] is not group:
                group = group_of[p] + group
        for i in group:
            group_of[i] = group
    groups = {id(g): g for g in group_of.values()}
    return [sorted(g) for g in groups.values() if len(g) > 1]


def fuse_ignoring_outputs(nodes):
    """Checks that the consumer is the producer's only user, but forgets that a graph output must be stored."""
    return _fuse_greedily(nodes, lambda p, node, group_of: p.index in group_of and p.users == (node.index,))


def fuse_reductions_too(nodes):
    """Any single-user producer but an input may join, a reduction (sum) included."""
    return _fuse_greedily(nodes, lambda p, node, group_of: (p.kind != "input" and p.users == (node.index,)
                                                             and not p.is_output))


def fuse_any_number_of_matmuls(nodes):
    """Forgets the one-matmul limit when a node joins two producers' groups."""
    return _fuse_greedily(nodes, _only_user, max_matmuls=None)


def fuse_counting_matmul_by_producer_kind(nodes):
    """Counts a matmul only when the producer itself is one, not when the producer's group holds one."""
    return _fuse_greedily(nodes, _only_user, matmuls_of=lambda nodes, producer, group: producer.kind == "matmul")


def fuse_single_read_as_single_user(nodes):
    """Reads "only one user" as "this node reads it once" (counts it in ``node.inputs``, not ``users``)."""
    return _fuse_greedily(nodes, lambda p, node, group_of: (p.index in group_of and node.inputs.count(p.index) == 1
                                                             and not p.is_output))


def fuse_pointwise_only(nodes):
    """A matmul is not pointwise, so it never opens a group (no matmul epilogue)."""
    return _fuse_greedily(nodes, _only_user, matmul_opens_group=False)


def _chain_runs(nodes, flush_last):
    """Runs of nodes, each the only user of the previous one: linear chains, not trees."""
    groups, run = [], []
    for node in nodes:
        previous = nodes[run[-1]] if run else None
        if (node.kind == "pointwise" and previous is not None and previous.index in node.inputs
                and previous.users == (node.index,) and not previous.is_output):
            run.append(node.index)
            continue
        if len(run) > 1:
            groups.append(run)
        run = [node.index] if node.kind in ("pointwise", "matmul") else []
    if flush_last and len(run) > 1:
        groups.append(run)
    return groups


def fuse_chain_runs(nodes):
    """Fusion groups are chains: a node joins only the run just before it, never two operands' groups."""
    return _chain_runs(nodes, flush_last=True)


def fuse_runs_forgetting_last(nodes):
    """A run is emitted only when a non-fusible node closes it, so the graph's final run is lost."""
    return _chain_runs(nodes, flush_last=False)


def fusion_with_group_ids(nodes):
    """Group ids in a dict of member lists, ``len(users) == 1``, tuples, and singleton groups returned."""
    owner, members = {}, {}
    for node in nodes:
        if node.kind not in ("pointwise", "matmul"):
            continue
        members[node.index], owner[node.index] = [node.index], node.index
        if node.kind == "matmul":
            continue
        matmuls = 0
        for p in dict.fromkeys(node.inputs):
            producer = nodes[p]
            if p not in owner or len(producer.users) != 1 or producer.is_output:
                continue
            other = owner[p]
            other_matmuls = sum(nodes[i].kind == "matmul" for i in members[other])
            if matmuls + other_matmuls > 1:
                continue
            matmuls += other_matmuls
            for i in members.pop(other):
                owner[i] = node.index
                members[node.index].append(i)
    return [tuple(sorted(m)) for m in members.values()]


def fusion_by_tree_roots(nodes):
    """Each fusible node's tree is computed from its producers' trees; the groups are the trees
    that no later tree absorbed."""
    tree = {}
    for node in nodes:
        if node.kind not in ("pointwise", "matmul"):
            continue
        tree[node.index], has_matmul = [node.index], node.kind == "matmul"
        if node.kind == "matmul":
            continue
        for p in dict.fromkeys(node.inputs):
            producer = nodes[p]
            if p not in tree or producer.users != (node.index,) or producer.is_output:
                continue
            sub_matmul = any(nodes[i].kind == "matmul" for i in tree[p])
            if sub_matmul and has_matmul:
                continue
            has_matmul |= sub_matmul
            tree[node.index] = tree[p] + tree[node.index]
    absorbed = {i for root, members in tree.items() for i in members if i != root}
    return [sorted(members) for root, members in tree.items() if root not in absorbed and len(members) > 1]


def fusion_union_find(nodes):
    """A union-find forest over node indices; each root knows whether its set holds a matmul.
    Returns tuples, singleton sets included."""
    parent, has_matmul = {}, {}

    def find(i):
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for node in nodes:
        if node.kind not in ("pointwise", "matmul"):
            continue
        parent[node.index], has_matmul[node.index] = node.index, node.kind == "matmul"
        if node.kind == "matmul":
            continue
        for p in node.inputs:
            if p not in parent or nodes[p].is_output or tuple(nodes[p].users) != (node.index,):
                continue
            a, b = find(p), find(node.index)
            if a == b or (has_matmul[a] and has_matmul[b]):
                continue
            parent[a] = b
            has_matmul[b] = has_matmul[a] or has_matmul[b]
    sets = {}
    for i in parent:
        sets.setdefault(find(i), []).append(i)
    return [tuple(members) for members in sets.values()]


# --- 04.cache_key ----------------------------------------------------------------------------

def _floats_as_markers(value):
    if isinstance(value, float):
        return "float"
    if isinstance(value, tuple):
        return tuple(_floats_as_markers(v) for v in value)
    return value


def cache_key_whole_nodes(nodes):
    """Hashes the records as they are: the learning rate is part of the key."""
    return tuple(nodes)


def cache_key_top_level_floats(nodes):
    """Abstracts positional floats but not keyword ones (SGD's ``alpha=-lr``)."""
    return tuple((n.op, n.inputs, tuple("float" if isinstance(c, float) else c for c in n.constants),
                  n.shape, n.dtype, n.is_output) for n in nodes)


def cache_key_without_shapes(nodes):
    """Ops and wiring only: a new batch size looks like the same graph."""
    return tuple((n.op, n.inputs) for n in nodes)


def cache_key_every_number_a_placeholder(nodes):
    """LTC lifts scalars, so every number is a program input: ints too (sum's dim, x + 1's 1)."""
    def numbers_as_markers(value):
        if isinstance(value, (int, float)):
            return "number"
        if isinstance(value, tuple):
            return tuple(numbers_as_markers(v) for v in value)
        return value
    return tuple((n.op, n.inputs, numbers_as_markers(n.constants), n.shape, n.dtype, n.is_output) for n in nodes)


def cache_key_top_level_scalars(nodes):
    """Scalar arguments (x + 1, x * 0.5) are program inputs; only ints inside lists (dims) are structure."""
    return tuple((n.op, n.inputs, tuple("scalar" if isinstance(c, (int, float)) else _floats_as_markers(c)
                                        for c in n.constants), n.shape, n.dtype, n.is_output) for n in nodes)


def cache_key_without_dtype(nodes):
    """Ops, wiring, constants and shapes: dtype taken for a detail of the values, not of the graph."""
    return tuple((n.op, n.inputs, _floats_as_markers(n.constants), n.shape, n.is_output) for n in nodes)


def cache_key_without_wiring(nodes):
    """The graph as its list of ops with shapes: which value each op reads is left out."""
    return tuple((n.op, _floats_as_markers(n.constants), n.shape, n.dtype, n.is_output) for n in nodes)


def cache_key_without_outputs(nodes):
    """The same nodes make the same graph, whichever of them are still needed afterwards."""
    return tuple((n.op, n.inputs, _floats_as_markers(n.constants), n.shape, n.dtype) for n in nodes)


def cache_key_without_keyword_constants(nodes):
    """Keyword constants are call options (``alpha=``, ``rounding_mode=``): dropped rather than abstracted."""
    def positional(constants):
        return tuple(_floats_as_markers(c) for c in constants
                     if not (isinstance(c, tuple) and len(c) == 2 and isinstance(c[0], str)))
    return tuple((n.op, n.inputs, positional(n.constants), n.shape, n.dtype, n.is_output) for n in nodes)


def cache_key_wiring_by_users(nodes):
    """The users tuples describe the wiring as well as the inputs do (the order of operands is lost)."""
    return tuple((n.op, n.users, _floats_as_markers(n.constants), n.shape, n.dtype, n.is_output) for n in nodes)


def cache_key_operands_as_set(nodes):
    """Which nodes each node reads, as a set: operand order taken for no part of the structure."""
    return tuple((n.op, frozenset(n.inputs), _floats_as_markers(n.constants), n.shape, n.dtype, n.is_output)
                 for n in nodes)


def cache_key_without_constants(nodes):
    """LTC makes every scalar a program input, so no constant (int, string or float) belongs in the key."""
    return tuple((n.op, n.inputs, n.shape, n.dtype, n.is_output) for n in nodes)


def cache_key_skeleton_and_edges(nodes):
    """In parts: a skeleton of ops, shapes and dtypes, an edge list with operand slots, the set of
    outputs, and the constants with each float replaced by the type ``float``."""
    def scrub(value):
        if type(value) is float:
            return float
        if isinstance(value, (tuple, list)):
            return tuple(scrub(v) for v in value)
        return value

    skeleton = tuple((n.op, n.shape, n.dtype) for n in nodes)
    edges = tuple((source, n.index, slot) for n in nodes for slot, source in enumerate(n.inputs))
    arity = tuple(len(n.inputs) for n in nodes)
    outputs = frozenset(n.index for n in nodes if n.is_output)
    return skeleton, edges, arity, outputs, tuple(scrub(n.constants) for n in nodes)


def cache_key_as_replaced_records(nodes):
    """The records themselves with their float constants replaced (``dataclasses.replace``)."""
    return tuple(dataclasses.replace(n, constants=_floats_as_markers(n.constants)) for n in nodes)


def cache_key_as_digest(nodes):
    """A SHA-256 hex digest of the structure's repr, floats as None: a str key."""
    def floats_as_none(value):
        if isinstance(value, float):
            return None
        if isinstance(value, tuple):
            return [floats_as_none(v) for v in value]
        return value
    text = repr([(n.op, n.inputs, floats_as_none(n.constants), n.shape, n.dtype, n.users, n.is_output)
                 for n in nodes])
    return hashlib.sha256(text.encode()).hexdigest()


# --- 04.graph_cuts -------------------------------------------------------------------------

def _live_nodes_per_step(step, state):
    """Nodes one step adds to a graph: a trial step, recorded, counted and dropped."""
    trial = step(state)
    return sum(node.kind != "input" for node in toychip.pending_graph([trial]))


def _steps_per_graph(steps, per_step, max_nodes):
    return max(k for k in range(1, steps + 1) if steps % k == 0 and k * per_step <= max_nodes)


def _cut_every(step, state, steps, per_graph):
    for done in range(1, steps + 1):
        state = step(state)
        if done % per_graph == 0:
            toychip.mark_step()
    return state


def cuts_every_step(step, state, steps, max_nodes):
    """One mark_step per step, as in a training loop: small graphs, one compile."""
    return _cut_every(step, state, steps, 1)


def cuts_never(step, state, steps, max_nodes):
    """Lazy mode runs everything at the end of the block anyway: no cut needed."""
    for _ in range(steps):
        state = step(state)
    return state


def cuts_fill_each_graph(step, state, steps, max_nodes):
    """Puts as many steps in each graph as the limit allows; the last graph takes the rest."""
    return _cut_every(step, state, steps, max_nodes // _live_nodes_per_step(step, state))


def cuts_when_over_the_limit(step, state, steps, max_nodes):
    """Watches the pending graph and cuts once it has reached the limit (one step too late)."""
    for _ in range(steps):
        state = step(state)
        if sum(node.kind != "input" for node in toychip.pending_graph([state])) >= max_nodes:
            toychip.mark_step()
    return state


def cuts_after_measuring_a_real_step(step, state, steps, max_nodes):
    """Runs the first step on its own to read its size from the sync log, then cuts evenly."""
    state = step(state)
    toychip.mark_step()
    per_step = toychip.lazy_metrics().sync_log[-1].nodes
    per_graph = _steps_per_graph(steps, per_step, max_nodes)
    for done in range(2, steps + 1):
        state = step(state)
        if done % per_graph == 0:
            toychip.mark_step()
    return state


def cuts_counting_recorded_nodes(step, state, steps, max_nodes):
    """Counts a step's nodes as recorded (nodes_recorded), dead ones included."""
    before = toychip.lazy_metrics().nodes_recorded
    step(state)
    per_step = toychip.lazy_metrics().nodes_recorded - before
    return _cut_every(step, state, steps, _steps_per_graph(steps, per_step, max_nodes))


def cuts_counting_inputs(step, state, steps, max_nodes):
    """Takes the whole pending graph of one step for its size, device-data inputs included."""
    per_step = len(toychip.pending_graph([step(state)]))
    return _cut_every(step, state, steps, _steps_per_graph(steps, per_step, max_nodes))


def cuts_keeping_the_trial(step, state, steps, max_nodes):
    """Measures a trial step but keeps it in a variable: an unused value is taken for a dead one."""
    trial = step(state)
    per_step = sum(node.kind != "input" for node in toychip.pending_graph([trial]))
    return _cut_every(step, state, steps, _steps_per_graph(steps, per_step, max_nodes))


def cuts_measured_on_the_first_step(step, state, steps, max_nodes):
    """No trial: records the first real step, measures the pending graph, and keeps going;
    counts steps down in a while loop."""
    state = step(state)
    per_step = len([n for n in toychip.pending_graph([state]) if n.kind != "input"])
    per_graph = max(k for k in range(1, max_nodes // per_step + 1) if steps % k == 0)
    in_graph, left = 1, steps - 1
    while True:
        if in_graph == per_graph:
            toychip.mark_step()
            in_graph = 0
        if left == 0:
            return state
        state, in_graph, left = step(state), in_graph + 1, left - 1


# --- 04.barrier_probe ---------------------------------------------------------------------

PLANNED_SYNCS = ("mark_step", "exit", "explicit")


def _own_syncs(run):
    """Sync reasons logged while ``run()`` runs, planned ones dropped."""
    before = len(toychip.lazy_metrics().sync_log)
    run()
    return [e.reason for e in toychip.lazy_metrics().sync_log[before:] if e.reason not in PLANNED_SYNCS]


def probe_on_device_data(op, example):
    """Moves the example to the chip and probes it: a copied tensor taken for a pending one."""
    with toychip.lazy():
        return _own_syncs(lambda: op(example.to("toychip")))


def probe_every_sync(op, example):
    """Every sync after the op counts, the one at the end of the block included."""
    toychip.reset_lazy_metrics()
    with toychip.lazy():
        pending = example.to("toychip") * 1.0
        result = op(pending)
    return [event.reason for event in toychip.lazy_metrics().sync_log]


def probe_first_sync_only(op, example):
    """An op is one barrier at most: the first sync it causes."""
    with toychip.lazy():
        pending = example.to("toychip") * 1.0
        return _own_syncs(lambda: op(pending))[:1]


def probe_forcing_the_result(op, example):
    """Reads the result back (``.cpu()``) to be sure the op really ran."""
    def run_and_read():
        result = op(pending)
        if isinstance(result, torch.Tensor):
            result.cpu()

    with toychip.lazy():
        pending = example.to("toychip") * 1.0
        return _own_syncs(run_and_read)


def probe_without_a_fresh_log(op, example):
    """Reads the whole sync log of the process: earlier probes' syncs are taken for this op's."""
    with toychip.lazy():
        op(example.to("toychip") * 1.0)
        reasons = [event.reason for event in toychip.lazy_metrics().sync_log]
    return [reason for reason in reasons if reason not in PLANNED_SYNCS]


class _KernelTableRules(TorchDispatchMode):
    """The properties of each op as a rule table: the reason a barrier has, read off the op."""

    def __init__(self):
        super().__init__()
        self.reasons = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        from toychip.op_table import OP_TABLE
        kwargs = kwargs or {}
        if any(isinstance(a, torch.Tensor) and a.device.type == "toychip" for a in args):
            if func is torch.ops.aten._local_scalar_dense.default:
                self.reasons.append("item")
            elif func is torch.ops.aten._to_copy.default and str(kwargs.get("device")) == "cpu":
                self.reasons.append("host_copy")
            elif torch.Tag.dynamic_output_shape in func.tags:
                self.reasons.append("data_dependent_shape")
            elif not (func.is_view or func in OP_TABLE or func in (torch.ops.aten._to_copy.default,
                                                                   torch.ops.aten.copy_.default)):
                self.reasons.append("fallback")
        return func(*args, **kwargs)


def probe_from_op_properties(op, example):
    """Needs no lazy mode: a barrier is a property of the op (tags, views, the chip's kernel table)."""
    with _KernelTableRules() as rules:
        op(example.to("toychip"))
    return rules.reasons


def probe_with_a_clean_slate(op, example):
    """Resets the metrics, opens its own block on a pending copy, and filters the log after the block."""
    chip = example.to("toychip")
    toychip.reset_lazy_metrics()
    with toychip.lazy():
        kept = [chip + 0.0]
        toychip.reset_lazy_metrics()
        kept.append(op(kept[0]))
        toychip.mark_step()
    return [e.reason for e in toychip.lazy_metrics().sync_log if e.reason not in {"mark_step", "exit", "explicit"}]


# --- 04.replay_backend --------------------------------------------------------------------

def _trace_and_compile(gm, example_inputs):
    """Steps 1-3 done right: (graph hash, {tensor id: argument position}, input ids, input values)."""
    lazy_args = [x.to("lazy") for x in example_inputs]
    position = {torch._lazy.get_tensor_id(t): i for i, t in enumerate(lazy_args)}
    outputs = tuple(gm(*lazy_args))
    graph_hash = torch._lazy.computation.get_graph_hash(outputs)
    ids, values = torch._lazy.computation.get_tensors_ts_device_data_node(outputs)
    torch._lazy.sync_multi(outputs, [])
    return graph_hash, position, ids, values


def _graph_inputs(args, position, ids, values):
    return [args[position[i]] if i in position else value for i, value in zip(ids, values)]


def replay_by_retracing(gm, example_inputs):
    """Correct numbers, but traces the graph again on every call (LTC's cache still hits)."""
    def run(*args):
        outputs = gm(*[a.to("lazy") for a in args])
        torch._lazy.mark_step()
        return [o.cpu() for o in outputs]
    return run


def replay_frozen_values(gm, example_inputs):
    """Caches the example's *results* instead of the program: later calls ignore their inputs."""
    outputs = [o.cpu() for o in gm(*[x.to("lazy") for x in example_inputs])]
    return lambda *args: outputs


def replay_traced_on_first_call(gm, example_inputs):
    """Tracing can wait for the first real call (like a lazily built cache), as long as it happens once."""
    compiled = {}

    def replay(*args):
        if not compiled:
            compiled["graph"] = _trace_and_compile(gm, args)
        graph_hash, position, ids, values = compiled["graph"]
        return torch._lazy.computation.run_cached_graph(graph_hash, _graph_inputs(args, position, ids, values))
    return replay


def replay_device_data_as_constants(gm, example_inputs):
    """Every device-data input of the graph is a constant: replays with the values the trace saw."""
    graph_hash, _, _, values = _trace_and_compile(gm, example_inputs)
    return lambda *args: torch._lazy.computation.run_cached_graph(graph_hash, list(values))


def replay_matching_python_ids(gm, example_inputs):
    """A tensor's id is Python's ``id()`` of the CPU argument, so no graph input is recognised as an argument."""
    graph_hash, _, ids, values = _trace_and_compile(gm, example_inputs)
    position = {id(x): i for i, x in enumerate(example_inputs)}
    return lambda *args: torch._lazy.computation.run_cached_graph(
        graph_hash, _graph_inputs(args, position, ids, values))


def replay_lazy_inputs(gm, example_inputs):
    """The cached graph runs on the lazy device, so the arguments are moved there first (results stay lazy)."""
    graph_hash, position, ids, values = _trace_and_compile(gm, example_inputs)
    return lambda *args: torch._lazy.computation.run_cached_graph(
        graph_hash, _graph_inputs([a.to("lazy") for a in args], position, ids, values))


def replay_arguments_as_inputs(gm, example_inputs):
    """The graph's inputs are the function's arguments, in order (scalar constants forgotten)."""
    graph_hash = _trace_and_compile(gm, example_inputs)[0]
    return lambda *args: torch._lazy.computation.run_cached_graph(graph_hash, list(args))


def replay_compiled_by_mark_step(gm, example_inputs):
    """Compiles with ``torch._lazy.mark_step()`` instead of ``sync_multi``: it runs every pending
    lazy tensor, unrelated ones too, in one graph whose hash is not ``gm``'s."""
    lazy_args = [x.to("lazy") for x in example_inputs]
    position = {torch._lazy.get_tensor_id(t): i for i, t in enumerate(lazy_args)}
    outputs = tuple(gm(*lazy_args))
    graph_hash = torch._lazy.computation.get_graph_hash(outputs)
    ids, values = torch._lazy.computation.get_tensors_ts_device_data_node(outputs)
    torch._lazy.mark_step()
    return lambda *args: torch._lazy.computation.run_cached_graph(
        graph_hash, _graph_inputs(args, position, ids, values))


def replay_ids_of_another_copy(gm, example_inputs):
    """Takes the argument ids from one ``.to("lazy")`` copy and traces ``gm`` on another: an id
    taken to name the data, not the lazy tensor."""
    position = {torch._lazy.get_tensor_id(x.to("lazy")): i for i, x in enumerate(example_inputs)}
    outputs = tuple(gm(*[x.to("lazy") for x in example_inputs]))
    graph_hash = torch._lazy.computation.get_graph_hash(outputs)
    ids, values = torch._lazy.computation.get_tensors_ts_device_data_node(outputs)
    torch._lazy.sync_multi(outputs, [])
    return lambda *args: torch._lazy.computation.run_cached_graph(
        graph_hash, _graph_inputs(args, position, ids, values))


def replay_arguments_then_constants(gm, example_inputs):
    """The graph's inputs are the arguments first, in order, then the remaining constants."""
    graph_hash, _, _, values = _trace_and_compile(gm, example_inputs)
    return lambda *args: torch._lazy.computation.run_cached_graph(graph_hash, list(args) + list(values[len(args):]))


class _ReplayCall:
    """A compiled graph as a callable object; argument ids kept in a list, matched with ``index``."""

    def __init__(self, gm, example_inputs):
        lazy_args = [torch.as_tensor(x).to(device=torch.device("lazy")) for x in example_inputs]
        self.arg_ids = [torch._lazy.get_tensor_id(t) for t in lazy_args]
        outputs = list(gm(*lazy_args))
        self.input_ids, self.input_values = torch._lazy.computation.get_tensors_ts_device_data_node(outputs)
        self.hash = torch._lazy.computation.get_graph_hash(outputs)
        torch._lazy.sync_multi(outputs, [])

    def __call__(self, *args):
        inputs = [args[self.arg_ids.index(i)] if i in self.arg_ids else value
                  for i, value in zip(self.input_ids, self.input_values)]
        return torch._lazy.computation.run_cached_graph(self.hash, inputs)


def replay_backend_as_object(gm, example_inputs):
    """A callable object instead of a closure."""
    return _ReplayCall(gm, example_inputs)


def replay_with_extract_compiled_graph(gm, example_inputs):
    """PyTorch's own bridge, ``torch._lazy.extract_compiled_graph``, used as the backend."""
    from torch._lazy.extract_compiled_graph import extract_compiled_graph
    return extract_compiled_graph(gm, example_inputs)


WRONG_ANSWERS = [
    ("04.lazy_recorder", lazy_run_eagerly,
     "Eager mode is enough: running fn on the real inputs costs nothing extra (dead ops run too)"),
    ("04.lazy_recorder", lazy_run_everything_recorded,
     "Recording is the whole point; replaying every recorded op is fine (no dead-code removal)"),
    ("04.lazy_recorder", lazy_run_one_pass_dce,
     "A dead node is one whose output nobody reads, so one pass finds them all (chains of dead nodes survive)"),
    ("04.lazy_recorder", lazy_run_top_level_args,
     "An op's producers are its tensor arguments; tensors inside a list (torch.stack) are not looked at"),
    ("04.lazy_recorder", lazy_run_without_kwargs,
     "Keyword arguments are options of no effect, so replaying func(*args) is enough (alpha= is lost)"),
    ("04.lazy_recorder", lazy_run_from_last_node,
     "fn's output is always the last op recorded"),
    ("04.lazy_recorder", lazy_run_single_output_ops,
     "Every ATen op returns one tensor, so a node is known by id(out) (torch.max's pair is not)"),
    ("04.lazy_recorder", lazy_run_keeping_only_ids,
     "id() is a stable name for a tensor, so the records need only ids, not the meta tensors (freed ids are reused)"),
    ("04.fusion_policy", no_fusion,
     "Returning no groups leaves fusion to the built-in scheduler"),
    ("04.fusion_policy", fuse_chains_ignoring_users,
     "Connected pointwise ops always fuse, even when an intermediate value is used elsewhere"),
    ("04.fusion_policy", fuse_ignoring_outputs,
     "A value used by one node can stay inside the kernel even when it is a graph output"),
    ("04.fusion_policy", fuse_reductions_too,
     "Any single-user producer but an input may join a group, a reduction (sum) included"),
    ("04.fusion_policy", fuse_any_number_of_matmuls,
     "The one-matmul limit is checked per producer, not for the merged group"),
    ("04.fusion_policy", fuse_counting_matmul_by_producer_kind,
     "A producer brings a matmul only if it is a matmul itself (relu(x @ w)'s group holds one too)"),
    ("04.fusion_policy", fuse_single_read_as_single_user,
     "'Only one user' means the node reads the producer once (node.inputs.count), not producer.users"),
    ("04.fusion_policy", fuse_pointwise_only,
     "A matmul is not pointwise, so it never starts a group (no matmul epilogue)"),
    ("04.fusion_policy", fuse_chain_runs,
     "Fusion groups are chains: a node joins only one operand's group, never two (no trees)"),
    ("04.fusion_policy", fuse_runs_forgetting_last,
     "A group is emitted when a non-fusible node closes it, so the last group of the graph is lost"),
    ("04.cache_key", cache_key_whole_nodes,
     "The records as they are make a fine key: the learning rate is part of the key"),
    ("04.cache_key", cache_key_top_level_floats,
     "Float constants appear directly in constants; keyword ones such as SGD's ('alpha', -lr) are missed"),
    ("04.cache_key", cache_key_without_shapes,
     "Ops and wiring are the graph; a new batch size is the same graph"),
    ("04.cache_key", cache_key_every_number_a_placeholder,
     "LTC lifts scalars, so every number, ints included (sum's dim, x + 1's 1), is a program input"),
    ("04.cache_key", cache_key_top_level_scalars,
     "Scalar arguments (x + 1, x * 0.5) are program inputs; only ints inside lists (dims) are structure"),
    ("04.cache_key", cache_key_without_dtype,
     "dtype is a property of the values, not of the graph"),
    ("04.cache_key", cache_key_without_wiring,
     "The list of ops with their shapes identifies the graph; which value each op reads does not matter"),
    ("04.cache_key", cache_key_without_outputs,
     "The same nodes make the same graph, whichever of them are still needed afterwards"),
    ("04.cache_key", cache_key_without_keyword_constants,
     "Keyword constants are call options (alpha=, rounding_mode=), so dropping them all is as good as abstracting"),
    ("04.cache_key", cache_key_wiring_by_users,
     "Each node's users describe the wiring as well as its inputs do (operand order is lost)"),
    ("04.cache_key", cache_key_operands_as_set,
     "Which nodes a node reads is the wiring; the order of its operands is not"),
    ("04.cache_key", cache_key_without_constants,
     "LTC makes every scalar a program input, so no constant (ints and strings too) belongs in the key"),
    ("04.graph_cuts", cuts_every_step,
     "One mark_step per step, as in a training loop, is always the best cut"),
    ("04.graph_cuts", cuts_never,
     "Lazy mode runs everything at the end of the block, so no cut is needed"),
    ("04.graph_cuts", cuts_fill_each_graph,
     "Fewest graphs means each graph as full as the limit allows; the remainder makes one more graph"),
    ("04.graph_cuts", cuts_when_over_the_limit,
     "Cut when the pending graph has reached the limit (checked after the step that passed it)"),
    ("04.graph_cuts", cuts_after_measuring_a_real_step,
     "Running the first step alone to measure it costs nothing (its graph is one more structure)"),
    ("04.graph_cuts", cuts_counting_recorded_nodes,
     "A step's size in a graph is the number of nodes it records, dead ones included"),
    ("04.graph_cuts", cuts_counting_inputs,
     "A step's size is its whole pending graph, device-data inputs included"),
    ("04.graph_cuts", cuts_keeping_the_trial,
     "A trial value that nobody uses is dead even while a variable still holds it"),
    ("04.barrier_probe", probe_on_device_data,
     "A tensor moved to the chip inside the lazy block is pending, like any lazy value"),
    ("04.barrier_probe", probe_every_sync,
     "Every sync after the op is its doing, the one at the end of the block included"),
    ("04.barrier_probe", probe_first_sync_only,
     "An op is one barrier at most: its first sync"),
    ("04.barrier_probe", probe_forcing_the_result,
     "The result must be read back (.cpu()) to see what the op does"),
    ("04.barrier_probe", probe_without_a_fresh_log,
     "The sync log starts empty for each probe"),
    ("04.barrier_probe", probe_from_op_properties,
     "A barrier is a property of the op (tags, views, the kernel table), readable without running lazy mode"),
    ("04.replay_backend", replay_by_retracing,
     "LTC's graph cache makes tracing free, so tracing on every call is fine"),
    ("04.replay_backend", replay_frozen_values,
     "Caching the first call's results is caching the compiled graph"),
    ("04.replay_backend", replay_traced_on_first_call,
     "Tracing can wait for the first real call, as long as it happens only once"),
    ("04.replay_backend", replay_device_data_as_constants,
     "Every device-data input of the graph is a constant to keep as traced"),
    ("04.replay_backend", replay_matching_python_ids,
     "A lazy tensor's id is Python's id() of the argument"),
    ("04.replay_backend", replay_lazy_inputs,
     "The cached graph runs on the lazy device, so its inputs must be moved there first"),
    ("04.replay_backend", replay_arguments_as_inputs,
     "The graph's inputs are the function's arguments in order (scalar constants forgotten)"),
    ("04.replay_backend", replay_arguments_then_constants,
     "The graph's inputs are the arguments first, in order, then the constants"),
    ("04.replay_backend", replay_ids_of_another_copy,
     "A lazy tensor id names the data, so the ids of one .to('lazy') copy match another copy's"),
    ("04.replay_backend", replay_compiled_by_mark_step,
     "mark_step() compiles the same graph as sync_multi(outputs, []) (it also runs every other pending tensor)"),
]

RIGHT_ANSWERS = [
    ("04.lazy_recorder", lazy_run_on_demand,
     "demand-driven recursive evaluation from the output, memoised; pytree for nested arguments"),
    ("04.lazy_recorder", lazy_run_backward_sweep,
     "one backward sweep with a set of needed tensor ids, then one forward pass"),
    ("04.lazy_recorder", lazy_run_value_numbers,
     "value numbers for every tensor seen (the list keeps the meta tensors alive), breadth-first walk"),
    ("04.fusion_policy", fusion_with_group_ids,
     "group ids in a dict, len(users) == 1, tuples, singleton groups returned"),
    ("04.fusion_policy", fusion_by_tree_roots,
     "a tree per node built from its producers' trees; groups are the trees no later tree absorbed"),
    ("04.fusion_policy", fusion_union_find,
     "a union-find forest with a matmul flag per root; tuples, singletons included"),
    ("04.cache_key", cache_key_as_replaced_records,
     "the IRNode records with float constants replaced (dataclasses.replace): index, kind and users too"),
    ("04.cache_key", cache_key_as_digest,
     "a str key: SHA-256 of the structure's repr, floats as None, users included"),
    ("04.cache_key", cache_key_skeleton_and_edges,
     "a tuple of parts: skeleton, edges with operand slots, a frozenset of outputs, floats as the type float"),
    ("04.graph_cuts", cuts_measured_on_the_first_step,
     "no trial: measures the first real step while it is pending, counts steps down in a while loop"),
    ("04.barrier_probe", probe_with_a_clean_slate,
     "resets the metrics, keeps the values in a list, ends with mark_step and filters after the block"),
    ("04.replay_backend", replay_backend_as_object,
     "a callable object; argument ids in a list matched with list.index; torch.device('lazy')"),
    ("04.replay_backend", replay_with_extract_compiled_graph,
     "PyTorch's own torch._lazy.extract_compiled_graph"),
]
